// Brokers and mqtt.js clients for the Mosquitto fact tests: each one is closed by
// `closeAll()` (call it from afterEach), including a bridge stand-in in its own process.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import mqtt, { type IClientOptions, type IConnackPacket, type MqttClient } from 'mqtt';
import { startMosquitto, type Mosquitto, type MosquittoOptions } from './mosquitto.js';
import { eventually } from './wait.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const uid = (): string => randomBytes(4).toString('hex');
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const waitUntil = (check: () => boolean, what: string, timeoutMs = 5000): Promise<void> => eventually(what, check, timeoutMs);

/** Waits until a counter has not moved for quietMs (the broker has sent all it will). */
export async function settle(count: () => number, quietMs = 250): Promise<number> {
  let last = -1;
  while (last !== count()) {
    last = count();
    await sleep(quietMs);
  }
  return last;
}

const cleanups: (() => Promise<void> | void)[] = [];

/** Registers something to close after the test, in reverse order of opening. */
export const onCleanup = (cleanup: () => Promise<void> | void): void => void cleanups.push(cleanup);

export async function closeAll(): Promise<void> {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}

export async function broker(opts?: MosquittoOptions): Promise<Mosquitto> {
  const b = await startMosquitto(opts);
  onCleanup(() => b.close());
  return b;
}

const sessionPresent = new WeakMap<MqttClient, boolean>();

export async function client(url: string, opts: IClientOptions = {}): Promise<MqttClient> {
  const c = mqtt.connect(url, { protocolVersion: 5, reconnectPeriod: 0, ...opts });
  onCleanup(() => void c.end(true));
  const connack = await new Promise<IConnackPacket>((resolve, reject) => {
    c.once('connect', resolve);
    c.once('error', reject);
  });
  c.on('error', () => {}); // later errors are asserted where they matter
  sessionPresent.set(c, connack.sessionPresent);
  return c;
}

/**
 * Subscribes to a fresh topic (under `under`, for an ACL), publishes one message to it and returns
 * what came back. Also a barrier: it comes after anything the broker had already queued for `c`.
 */
export async function echo(c: MqttClient, payload: string, under = 'echo'): Promise<string> {
  const topic = `${under}/${uid()}`;
  await c.subscribeAsync(topic, { qos: 1 });
  const received = new Promise<string>((resolve) => c.once('message', (_t, message) => resolve(message.toString())));
  await c.publishAsync(topic, payload, { qos: 1 });
  return received;
}

export interface Received {
  topic: string;
  payload: string;
  dup: boolean;
}

/**
 * A persistent-session client whose customHandleAcks (given before connect, so nothing the
 * broker sends on session resume escapes it) records each message and acks it with ack().
 */
export async function sessionClient(url: string, clientId: string, ack: (r: Received) => number | undefined, more: IClientOptions = {}) {
  const received: Received[] = [];
  const c = await client(url, {
    clientId,
    clean: false,
    properties: { sessionExpiryInterval: 3600 },
    customHandleAcks: (topic, message, packet: { dup?: boolean }, done) => {
      const r = { topic, payload: message.toString(), dup: packet.dup === true };
      received.push(r);
      const code = ack(r);
      if (code !== undefined) done(code);
    },
    ...more,
  });
  return { c, received, sessionPresent: sessionPresent.get(c) };
}

// A bridge stand-in in its own process, so SIGKILL leaves no chance to send anything.
const CHILD = `
const { default: mqtt } = await import('mqtt');
const cfg = JSON.parse(process.env.CHILD_CFG);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
const c = mqtt.connect(cfg.url, { protocolVersion: 5, clientId: cfg.clientId, clean: false, reconnectPeriod: 0,
  properties: { sessionExpiryInterval: cfg.expiry },
  customHandleAcks: (topic, message, packet, done) => {
    out({ event: 'message', payload: message.toString(), dup: packet.dup === true });
    if (!cfg.ack) return; // PUBACK held: "admission" never finishes
    done(0);
    // The broker reads a connection in order: once this marker is acked, so was the message.
    c.publish('marker/' + cfg.clientId, 'x', { qos: 1 }, () => out({ event: 'acked' }));
  } });
c.on('connect', () => c.subscribe(cfg.filter, { qos: 1 }, () => out({ event: 'ready' })));
`;

interface ChildEvent {
  event: string;
  payload?: string;
  dup?: boolean;
}

export async function childClient(cfg: { url: string; clientId: string; filter: string; ack: boolean; expiry: number }) {
  const proc: ChildProcess = spawn(process.execPath, ['--input-type=module', '-e', CHILD], {
    cwd: ROOT,
    env: { ...process.env, CHILD_CFG: JSON.stringify(cfg) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  onCleanup(() => void proc.kill('SIGKILL'));
  const events: ChildEvent[] = [];
  createInterface({ input: proc.stdout! }).on('line', (line) => events.push(JSON.parse(line) as ChildEvent));
  const waitFor = async (event: string): Promise<ChildEvent> => {
    await waitUntil(() => events.some((e) => e.event === event), `child event ${event}`);
    return events.find((e) => e.event === event) as ChildEvent;
  };
  const kill = async (): Promise<void> => {
    const exit = once(proc, 'exit');
    proc.kill('SIGKILL');
    await exit;
  };
  await waitFor('ready');
  return { events, waitFor, kill };
}
