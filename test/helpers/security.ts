// Test-time credentials: AUTH_FILE users with scrypt hashes, a CA and certificates made with
// `openssl` in a temp dir, and MQTT clients over TCP, TLS and WebSocket.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt, { MqttClient, type IClientOptions } from 'mqtt';
import { hashPassword } from '../../broker/auth.js';
import type { Role } from '../../broker/acl.js';

export interface TestUser {
  username: string;
  password: string;
  role: Role;
  device_id?: string;
}

export function tempDir(prefix = 'eab-sec-'): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export async function writeAuthFile(path: string, users: TestUser[]): Promise<void> {
  const entries = await Promise.all(users.map(async ({ password, ...rest }) => ({ ...rest, password_hash: await hashPassword(password) })));
  writeFileSync(path, JSON.stringify({ users: entries }, null, 2));
}

export interface Pki {
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  /** A client certificate from the trusted CA for this CN (or, without CN, a DNS SAN). */
  client(name: string, options?: { sanOnly?: boolean; otherCa?: boolean }): { cert: Buffer; key: Buffer };
  ca: Buffer;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

function newCa(dir: string, name: string): void {
  openssl(
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
    ],
    dir,
  );
}

function signed(dir: string, ca: string, name: string, subject: string, ext: string): void {
  openssl(
    ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject],
    dir,
  );
  writeFileSync(join(dir, `${name}.ext`), `${ext}\n`);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      `${ca}.crt`,
      '-CAkey',
      `${ca}.key`,
      '-CAcreateserial',
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ],
    dir,
  );
}

/** A CA, a server certificate for 127.0.0.1/localhost, and client certificates on demand. */
export function makePki(dir: string): Pki {
  newCa(dir, 'ca');
  newCa(dir, 'other-ca');
  signed(dir, 'ca', 'server', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth');
  let n = 0;
  return {
    caFile: join(dir, 'ca.crt'),
    serverCertFile: join(dir, 'server.crt'),
    serverKeyFile: join(dir, 'server.key'),
    ca: readFileSync(join(dir, 'ca.crt')),
    client(name, { sanOnly = false, otherCa = false } = {}) {
      n += 1;
      const file = `client-${n}`;
      const subject = sanOnly ? '/O=edge-ai-bridge-tests' : `/CN=${name}`;
      const ext = `${sanOnly ? `subjectAltName=DNS:${name}\n` : ''}extendedKeyUsage=clientAuth`;
      signed(dir, otherCa ? 'other-ca' : 'ca', file, subject, ext);
      return { cert: readFileSync(join(dir, `${file}.crt`)), key: readFileSync(join(dir, `${file}.key`)) };
    },
  };
}

const base: IClientOptions = { reconnectPeriod: 0, connectTimeout: 5000, clean: true };

export const connectTcp = (port: number, options: IClientOptions): Promise<MqttClient> =>
  mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { ...base, ...options });

/** Like mqtt.connectAsync, but also rejects when the connection closes before a CONNACK. */
function settle(client: MqttClient): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
    client.once('close', () => {
      client.end(true);
      reject(new Error('connection closed before CONNACK'));
    });
  });
}

export const connectTls = (port: number, options: IClientOptions): Promise<MqttClient> =>
  settle(mqtt.connect(`mqtts://127.0.0.1:${port}`, { ...base, ...options }));

export const connectWs = (port: number, options: IClientOptions): Promise<MqttClient> =>
  mqtt.connectAsync(`ws://127.0.0.1:${port}/mqtt`, { ...base, ...options });

/** Connects over TCP from a chosen local address (127.0.0.x), for per-address behaviour. */
export function connectFrom(localAddress: string, port: number, options: IClientOptions): Promise<MqttClient> {
  return settle(new MqttClient(() => createConnection({ host: '127.0.0.1', port, localAddress }), { ...base, ...options }));
}

/** Resolves true once the client is disconnected by the broker, false if it stays up `ms`. */
export function disconnectedWithin(client: MqttClient, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (!client.connected) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    client.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
