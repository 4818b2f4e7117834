// Secrets never leave the process: one run of the compiled service at
// LOG_LEVEL=trace with every kind of secret configured — upstream, fallback and CONFIG_FILE
// (apiKeys and apiKeysEnv) keys, ADMIN_TOKEN, AUTH_FILE passwords, the TLS private key — and
// traffic that exercises good and bad paths (revoked key, 5xx, 429, a dead letter, bad
// requests, wrong passwords, wrong admin tokens). Everything the outside can see is collected:
// the child's stdout and stderr, every MQTT message (an operator subscribed to `#` and `$SYS/#`,
// an observer, the devices), every admin HTTP answer (status, headers, body). None may contain
// a secret, whole, without its prefix, or base64-encoded.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { ask } from '../helpers/harness.js';
import { connectTcp, connectTls, makePki, tempDir, writeAuthFile, type Pki } from '../helpers/security.js';
import { eventually } from '../helpers/wait.js';

const rnd = (): string => randomBytes(8).toString('hex');
const secret = (label: string): string => `SECRET-${label}-${rnd()}`;

const KEY_ALPHA = `sk-${secret('alpha')}`; // revoked by the primary upstream
const KEY_BETA = `sk-${secret('beta')}`;
const KEY_FALLBACK = `sk-${secret('fallback')}`;
const KEY_INLINE = `sk-${secret('inline')}`; // CONFIG_FILE providers[].apiKeys
const KEY_ENV = `sk-${secret('envkey')}`; // CONFIG_FILE providers[].apiKeysEnv
const ADMIN_TOKEN = secret('admintoken');
const WRONG_TOKEN = secret('wrongtoken');
const PW_DEVICE = secret('pwdevice');
const PW_TLS_DEVICE = secret('pwtlsdevice');
const PW_OPERATOR = secret('pwoperator');
const PW_OBSERVER = secret('pwobserver');
const WRONG_PWS = [secret('wrongpw1'), secret('wrongpw2'), secret('wrongpw3'), secret('wrongpw4')];

interface Captured {
  where: string;
  text: string;
}

const dir = tempDir('eab-secrets-');
let pki: Pki;
let primary: UpstreamSim;
let fallback: UpstreamSim;
let extra: UpstreamSim;
let service: ServiceProcess | undefined;
let rawStdout = '';
const mqttOut: Captured[] = [];
const httpOut: Captured[] = [];
const clients: MqttClient[] = [];

/** Everything that must never contain a secret: the secrets, their random parts, base64 forms, the key PEM body. */
function needles(): Array<{ name: string; value: string }> {
  const named: Record<string, string> = {
    KEY_ALPHA,
    KEY_BETA,
    KEY_FALLBACK,
    KEY_INLINE,
    KEY_ENV,
    ADMIN_TOKEN,
    WRONG_TOKEN,
    PW_DEVICE,
    PW_TLS_DEVICE,
    PW_OPERATOR,
    PW_OBSERVER,
    ...Object.fromEntries(WRONG_PWS.map((pw, i) => [`WRONG_PW_${i + 1}`, pw])),
  };
  const out: Array<{ name: string; value: string }> = [];
  for (const [name, value] of Object.entries(named)) {
    out.push({ name, value });
    out.push({ name: `${name} (random part)`, value: value.slice(-16) });
    out.push({ name: `${name} (base64)`, value: Buffer.from(value).toString('base64').slice(0, 24) });
  }
  const pem = readFileSync(pki.serverKeyFile, 'utf8');
  const body = pem
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('-----'));
  for (const [i, line] of body.entries()) if (line.length >= 16) out.push({ name: `TLS key PEM line ${i + 1}`, value: line });
  out.push({ name: 'PEM private key marker', value: 'PRIVATE KEY' });
  return out;
}

function onMessages(client: MqttClient, who: string): void {
  client.on('message', (topic, payload) => mqttOut.push({ where: `mqtt ${who} ${topic}`, text: payload.toString() }));
}

async function login(options: Parameters<typeof connectTcp>[1], tls = false): Promise<MqttClient> {
  const port = tls ? Number(readyPorts.mqttTls) : service!.mqttPort;
  const client = tls ? await connectTls(port, { ca: pki.ca, ...options }) : await connectTcp(port, options);
  clients.push(client);
  return client;
}

let readyPorts: Record<string, number> = {};

/** The dashboard's event stream until its first tick (the providers' keys included, by hash). */
async function dashboardEvents(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${service!.httpPort}/dashboard/api/events`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const reader = res.body!.getReader();
  let text = '';
  const give = setTimeout(() => void reader.cancel(), 5000);
  while (!text.includes('event: tick')) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  clearTimeout(give);
  await reader.cancel();
  return text;
}

async function http(path: string, init: { method?: string; token?: string } = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://127.0.0.1:${service!.httpPort}${path}`, {
    method: init.method ?? 'GET',
    headers: init.token === undefined ? {} : { authorization: `Bearer ${init.token}` },
  });
  const text = await res.text();
  const headers = [...res.headers.entries()].map(([k, v]) => `${k}: ${v}`).join('\n');
  httpOut.push({
    where: `http ${init.method ?? 'GET'} ${path} (token ${init.token === undefined ? 'none' : init.token === ADMIN_TOKEN ? 'right' : 'wrong'})`,
    text: `${res.status}\n${headers}\n\n${text}`,
  });
  return { status: res.status, text };
}

/** Replies on a device's result topic, by id. */
function repliesOf(deviceId: string): Array<Record<string, unknown>> {
  return mqttOut
    .filter((m) => m.where.startsWith(`mqtt ${deviceId} `) && m.where.endsWith(`devices/${deviceId}/result`))
    .map((m) => JSON.parse(m.text) as Record<string, unknown>);
}

const waitFor = (what: string, check: () => boolean, timeoutMs = 8000): Promise<void> => eventually(what, check, timeoutMs);

beforeAll(async () => {
  pki = makePki(dir.path);
  const authFile = join(dir.path, 'auth.json');
  await writeAuthFile(authFile, [
    { username: 'cam-s1', password: PW_DEVICE, role: 'device', device_id: 'cam-s1' },
    { username: 'cam-s2', password: PW_TLS_DEVICE, role: 'device', device_id: 'cam-s2' },
    { username: 'ops', password: PW_OPERATOR, role: 'operator' },
    { username: 'scada', password: PW_OBSERVER, role: 'observer' },
  ]);
  primary = await startUpstreamSim({ port: 0, latencyMs: 5, errorRate: 0.3, revokedKeys: [KEY_ALPHA] });
  fallback = await startUpstreamSim({ port: 0, latencyMs: 5 });
  extra = await startUpstreamSim({ port: 0, latencyMs: 5 });
  const configFile = join(dir.path, 'config.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      providers: [{ name: 'extra', url: extra.url, apiKeys: [KEY_INLINE], apiKeysEnv: 'EXTRA_PROVIDER_KEYS' }],
      routing: { high: { provider: 'fallback' }, low: { provider: 'extra' } },
    }),
  );
  service = await startServiceProcess({
    LOG_LEVEL: 'trace',
    UPSTREAM_URL: primary.url,
    UPSTREAM_API_KEYS: `${KEY_ALPHA},${KEY_BETA}`,
    FALLBACK_URL: fallback.url,
    FALLBACK_API_KEYS: KEY_FALLBACK,
    CONFIG_FILE: configFile,
    EXTRA_PROVIDER_KEYS: KEY_ENV,
    ADMIN_TOKEN,
    AUTH_FILE: authFile,
    ALLOW_ANONYMOUS: 'false',
    MQTT_TLS_PORT: '0',
    TLS_CERT_FILE: pki.serverCertFile,
    TLS_KEY_FILE: pki.serverKeyFile,
    MAX_ATTEMPTS: '3',
  });
  // Lines before "bridge ready" are in service.logs (parsed); from here on the raw text too.
  service.child.stdout!.on('data', (chunk: Buffer) => (rawStdout += chunk.toString()));
  readyPorts = (JSON.parse((await http('/readyz')).text) as { ports: Record<string, number> }).ports;
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
  await service?.stop('SIGKILL');
  await Promise.all([primary, fallback, extra].map((s) => s?.close()));
  dir.remove();
});

describe('secrets', () => {
  it('never appear in logs, MQTT messages, admin HTTP answers or error replies', { timeout: 30_000 }, async () => {
    const svc = service!;
    // Operator and observer see every topic (and $SYS) they may.
    const ops = await login({ clientId: 'ops-1', username: 'ops', password: PW_OPERATOR });
    onMessages(ops, 'ops-1');
    await ops.subscribeAsync({ '#': { qos: 1 }, '$SYS/#': { qos: 0 } });
    const scada = await login({ clientId: 'scada-1', username: 'scada', password: PW_OBSERVER });
    onMessages(scada, 'scada-1');
    await scada.subscribeAsync({ 'bridge/#': { qos: 1 }, 'devices/+/result': { qos: 1 } });

    // Wrong logins: wrong passwords, an unknown user, a wrong password over TLS (4 < the throttle's 5).
    await expect(login({ clientId: 'cam-s1', username: 'cam-s1', password: WRONG_PWS[0] })).rejects.toThrow(/Bad username or password/i);
    await expect(login({ clientId: 'ops-2', username: 'ops', password: WRONG_PWS[1] })).rejects.toThrow(/Bad username or password/i);
    await expect(login({ clientId: 'ghost', username: `nobody`, password: WRONG_PWS[2] })).rejects.toThrow(/Bad username or password/i);
    await expect(login({ clientId: 'cam-s2', username: 'cam-s2', password: WRONG_PWS[3] }, true)).rejects.toThrow();

    // Devices: one over TCP, one over TLS, both logged in correctly.
    const cam1 = await login({ clientId: 'cam-s1', username: 'cam-s1', password: PW_DEVICE });
    onMessages(cam1, 'cam-s1');
    await cam1.subscribeAsync({ 'devices/cam-s1/result': { qos: 1 }, 'bridge/+/status': { qos: 1 } });
    const cam2 = await login({ clientId: 'cam-s2', username: 'cam-s2', password: PW_TLS_DEVICE }, true);
    onMessages(cam2, 'cam-s2');
    await cam2.subscribeAsync({ 'devices/cam-s2/result': { qos: 1 } });

    // Traffic: two 429s first, then normal (primary: revoked alpha, beta, 30 % 5xx), high
    // (fallback), low (the CONFIG_FILE provider), and bad requests answered with errors.
    primary.script({ status: 429, retryAfterS: 1 }, { status: 429, retryAfterS: 1 });
    const sent: string[] = [];
    const send = async (cam: MqttClient, deviceId: string, priority: string, body: unknown): Promise<void> => {
      await cam.publishAsync(`devices/${deviceId}/infer/${priority}`, typeof body === 'string' ? body : JSON.stringify(body), { qos: 1 });
    };
    for (let i = 0; i < 12; i++) {
      const priority = ['normal', 'normal', 'high', 'low'][i % 4] as string;
      sent.push(`ok-${i}`);
      await send(i % 3 === 0 ? cam2 : cam1, i % 3 === 0 ? 'cam-s2' : 'cam-s1', priority, ask(`ok-${i}`, `question ${i} ${rnd()}`));
    }
    await send(cam1, 'cam-s1', 'normal', '{not json');
    await send(cam1, 'cam-s1', 'normal', { id: 'bad-1' });
    await send(cam1, 'cam-s1', 'urgent', ask('bad-2'));
    await send(cam1, 'cam-s1', 'normal', ask('bad-3', 'x', { max_tokens: -3 }));
    await waitFor('replies to every request', () => {
      const ids = new Set([...repliesOf('cam-s1'), ...repliesOf('cam-s2')].map((r) => r.id));
      return sent.every((id) => ids.has(id)) && ['bad-1', 'bad-2'].every((id) => ids.has(id));
    });

    // A request the upstream refuses, with an error message that echoes the key it was sent
    // (as some OpenAI-compatible servers do): an error reply and a dead letter, key scrubbed.
    fallback.script({ status: 409, body: { error: { message: `Invalid request for key ${KEY_FALLBACK}`, type: 'invalid_request_error' } } });
    await send(cam1, 'cam-s1', 'high', ask('dead-1'));
    await waitFor('the dead letter reply', () => repliesOf('cam-s1').some((r) => r.id === 'dead-1'));
    expect(repliesOf('cam-s1').find((r) => r.id === 'dead-1')).toMatchObject({
      ok: false,
      error: { code: 'upstream_error', message: 'upstream answered 409: Invalid request for key [redacted]' },
    });

    // Admin HTTP: no token, a wrong token, the right one; public endpoints.
    expect((await http('/v1/dlq')).status).toBe(401);
    expect((await http('/v1/dlq', { token: WRONG_TOKEN })).status).toBe(401);
    expect((await http('/v1/usage', { token: WRONG_TOKEN })).status).toBe(401);
    const dlq = await http('/v1/dlq', { token: ADMIN_TOKEN });
    expect(dlq.status).toBe(200);
    expect(dlq.text).toContain('dead-1');
    expect((await http('/v1/usage', { token: ADMIN_TOKEN })).status).toBe(200);
    expect((await http('/v1/usage?hours=nope', { token: ADMIN_TOKEN })).status).toBe(400);
    expect((await http('/v1/devices', { token: ADMIN_TOKEN })).status).toBe(200);
    expect((await http('/v1/nothing-here', { token: ADMIN_TOKEN })).status).toBe(404);
    expect((await http('/metrics')).status).toBe(200);
    expect((await http('/healthz')).status).toBe(200);
    expect((await http('/readyz')).status).toBe(200);

    // The dashboard: its page and files, its data (token required: ADMIN_TOKEN is set) and events.
    expect((await http('/dashboard/api/usage')).status).toBe(401);
    for (const path of ['/', '/dashboard/app.js', '/dashboard/api/access']) expect((await http(path)).status).toBe(200);
    for (const path of ['/dashboard/api/usage', '/dashboard/api/dlq', '/dashboard/api/dlq/cam-s1/dead-1', '/dashboard/api/devices?q=cam']) {
      expect((await http(path, { token: ADMIN_TOKEN })).status).toBe(200);
    }
    const events = await dashboardEvents();
    expect(events).toContain('event: tick');
    expect(events).toContain('"provider":"primary"');
    httpOut.push({ where: 'dashboard events', text: events });

    // The metrics topic comes every 5 s: wait for one snapshot.
    await waitFor('a bridge/+/metrics message', () => mqttOut.some((m) => /bridge\/[^/]+\/metrics$/.test(m.where)), 7000);

    // Stop gracefully, so shutdown logs and the offline status are part of the scan.
    await Promise.all(clients.map((c) => c.endAsync().catch(() => undefined)));
    clients.length = 0;
    expect(await svc.stop('SIGTERM')).toBe(0);
    // The process has exited; what it wrote last is read once its pipes close.
    await Promise.all([svc.child.stdout, svc.child.stderr].map((pipe) => (pipe && !pipe.closed ? once(pipe, 'close') : undefined)));

    // Something real was captured, so a leak would be seen.
    const okReplies = [...repliesOf('cam-s1'), ...repliesOf('cam-s2')].filter((r) => r.ok === true);
    expect(okReplies.length).toBeGreaterThanOrEqual(6);
    expect(svc.logs.length).toBeGreaterThan(50);
    expect(rawStdout.split('\n').length).toBeGreaterThan(30);
    expect(mqttOut.length).toBeGreaterThan(25);
    expect(mqttOut.some((m) => /bridge\/[^/]+\/status$/.test(m.where))).toBe(true);
    expect(httpOut.length).toBeGreaterThanOrEqual(12);
    expect(svc.logs.some((l) => String(l.msg).includes('API key'))).toBe(true); // the revoked key was logged (by its id)
    const bearers = (sim: UpstreamSim): Set<unknown> => new Set(sim.requests.map((r) => r.headers.authorization));
    expect(bearers(primary)).toEqual(new Set([`Bearer ${KEY_ALPHA}`, `Bearer ${KEY_BETA}`]));
    expect(bearers(fallback)).toEqual(new Set([`Bearer ${KEY_FALLBACK}`]));
    expect(bearers(extra)).toEqual(new Set([`Bearer ${KEY_INLINE}`, `Bearer ${KEY_ENV}`]));
    expect(primary.stats().byStatus['401']).toBeGreaterThanOrEqual(1);
    // Whether the second scripted 429 is met depends on how calls overlap the refused key's probe.
    expect(primary.stats().byStatus['429']).toBeGreaterThanOrEqual(1);

    // The scan.
    const outputs: Captured[] = [
      { where: 'stdout (raw, after ready)', text: rawStdout },
      ...svc.logs.map((l, i) => ({ where: `log line ${i + 1}`, text: JSON.stringify(l) })),
      { where: 'stderr', text: svc.stderr() },
      ...mqttOut,
      ...httpOut,
    ];
    const leaks: string[] = [];
    for (const { name, value } of needles()) {
      for (const { where, text } of outputs) {
        if (text.includes(value)) leaks.push(`${name} in ${where}: ${text.slice(0, 300)}`);
      }
    }
    expect(leaks).toEqual([]);
  });
});
