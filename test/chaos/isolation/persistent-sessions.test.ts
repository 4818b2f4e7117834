// Persistent sessions are bounded: a device cannot open more than MAX_SESSIONS_PER_DEVICE of
// them, an offline subscriber's queue keeps at most MAX_OFFLINE_MESSAGES (the oldest dropped
// and counted) for at most OFFLINE_MESSAGE_TTL_S, and a 3.1.1 persistent session ends after
// MAX_SESSION_EXPIRY_S of absence. The embedded broker, with Redis (what it keeps is checked
// in Redis) and in memory; an innocent device is answered ok throughout.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ReplySchema, type Reply } from '../../../contract/index.js';
import { readyz } from '../../helpers/chaos.js';
import { ask, okOf, startHarness, type Device, type Harness } from '../../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { tempDir, writeAuthFile } from '../../helpers/security.js';
import { eventually } from '../../helpers/wait.js';

const redis = connectRedis();
const harnesses: Harness[] = [];
const clients: MqttClient[] = [];
const prefixes: string[] = [];
const dirs: Array<{ remove(): void }> = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.endAsync(true).catch(() => undefined)));
  await Promise.all(harnesses.splice(0).map((h) => h.close()));
  for (const prefix of prefixes.splice(0)) await deletePrefix(redis, prefix);
  for (const dir of dirs.splice(0)) dir.remove();
});
afterAll(() => redis.disconnect());

const suffix = (): string => randomBytes(3).toString('hex');
const SCADA = { username: 'scada', password: 'scada-password-1', role: 'observer' as const };

type Backend = 'redis' | 'memory';

interface Bridge {
  h: Harness;
  prefix: string;
  /** The Redis key prefix of the broker's persistence (with Redis). */
  aedesKeys: string;
}

async function start(backend: Backend, env: Record<string, string>, prefix = uniquePrefix('sessions')): Promise<Bridge> {
  const dir = tempDir();
  dirs.push(dir);
  const authFile = join(dir.path, 'auth.json');
  await writeAuthFile(authFile, [SCADA]);
  const redisEnv: Record<string, string> = backend === 'redis' ? { REDIS_URL, REDIS_PREFIX: prefix } : {};
  if (backend === 'redis') prefixes.push(prefix);
  const h = await startHarness({ AUTH_FILE: authFile, ...redisEnv, ...env });
  harnesses.push(h);
  return { h, prefix, aedesKeys: `{${prefix}}:aedes:` };
}

interface Observer {
  client: MqttClient;
  sessionPresent: boolean;
  replies: Reply[];
}

/** Connects with the message listener in place before CONNACK, so queued messages are counted. */
async function connect(h: Harness, clientId: string, options: IClientOptions): Promise<Observer> {
  const client = mqtt.connect(h.url, { clientId, reconnectPeriod: 0, protocolVersion: 4, ...options });
  clients.push(client);
  const replies: Reply[] = [];
  client.on('message', (_topic, payload) => replies.push(ReplySchema.parse(JSON.parse(payload.toString()))));
  const sessionPresent = await new Promise<boolean>((resolve, reject) => {
    client.once('connect', (connack) => resolve(connack.sessionPresent));
    client.once('error', reject);
  });
  return { client, sessionPresent, replies };
}

/** The CONNACK code a refused CONNECT got. */
async function refusalOf(h: Harness, clientId: string, options: IClientOptions): Promise<number | undefined> {
  try {
    await connect(h, clientId, options);
    return undefined;
  } catch (err) {
    return (err as { code?: number }).code;
  }
}

/** A persistent observer of every device's replies, gone offline. */
async function offlineObserver(h: Harness, clientId: string): Promise<void> {
  const observer = await connect(h, clientId, { clean: false, username: SCADA.username, password: SCADA.password });
  await observer.client.subscribeAsync('devices/+/result', { qos: 1 });
  await observer.client.endAsync();
}

/** Each device asks `count` questions one after the other; every answer is ok. Returns the ids in order. */
async function fleetAsks(devices: Device[], count: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    for (const device of devices) {
      const id = `${tag}-${device.deviceId}-${i}`;
      await device.publish('normal', ask(id));
      okOf((await device.reply(id))[0]);
      ids.push(id);
    }
  }
  return ids;
}

/** Bytes Redis holds for the broker's persistence of this deployment (MEMORY USAGE of each key). */
async function persistenceBytes(pattern: string): Promise<{ keys: number; bytes: number; packets: number }> {
  let cursor = '0';
  let keys = 0;
  let bytes = 0;
  let packets = 0;
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${pattern}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of found) {
      keys += 1;
      bytes += Number((await redis.memory('USAGE', key)) ?? 0);
      if (/:aedes:packet:[^:]+:[^:]+$/.test(key)) packets += 1;
    }
  } while (cursor !== '0');
  return { keys, bytes, packets };
}

describe.each<Backend>(['redis', 'memory'])('persistent sessions are bounded (%s)', (backend) => {
  it('refuses a device persistent sessions past MAX_SESSIONS_PER_DEVICE, at CONNECT; clean sessions and other devices unaffected', async () => {
    const { h, aedesKeys } = await start(backend, { MAX_SESSIONS_PER_DEVICE: '3' });
    const attacker = `att-${suffix()}`;
    const innocent = await h.device(`inn-${suffix()}`);
    for (const n of [1, 2, 3]) (await connect(h, `${attacker}.${n}`, { clean: false })).client.end(true);
    expect(await refusalOf(h, `${attacker}.4`, { clean: false })).toBe(3); // 3.1.1: server unavailable
    expect(await refusalOf(h, `${attacker}.5`, { clean: true, protocolVersion: 5, properties: { sessionExpiryInterval: 600 } })).toBe(0x97);
    for (let n = 6; n < 30; n += 1) expect(await refusalOf(h, `${attacker}.${n}`, { clean: false })).toBe(3);
    // Clean sessions do not count; the device's own sessions resume.
    expect(await refusalOf(h, `${attacker}.clean`, { clean: true })).toBeUndefined();
    expect(await refusalOf(h, `${attacker}.2`, { clean: false })).toBeUndefined();
    // Another device: its own persistent sessions, and its requests answered.
    expect(await refusalOf(h, `${innocent.deviceId}.persistent`, { clean: false })).toBeUndefined();
    await innocent.publish('normal', ask('innocent'));
    okOf((await innocent.reply('innocent'))[0]);
    expect(await readyz(h.bridge.httpPort)).toBe(200);
    expect(h.bridge.broker?.sessions.refused).toBe(26);
    if (backend === 'redis') expect(await redis.scard(`${aedesKeys}bridge:device:${attacker}`)).toBe(3);
  });

  it('keeps an offline observer at most MAX_OFFLINE_MESSAGES of the fleet’s replies, the newest, dropping and counting the rest', async () => {
    // MAX_SESSION_EXPIRY_S: the sweeper samples the gauge every 5 s; the observer is away for less.
    const { h, aedesKeys } = await start(backend, { MAX_OFFLINE_MESSAGES: '20', MAX_SESSION_EXPIRY_S: '20' });
    const scada = `scada-${suffix()}`;
    await offlineObserver(h, scada);
    const fleet = await Promise.all([1, 2, 3].map((n) => h.device(`fleet${n}-${suffix()}`)));
    const first = await fleetAsks(fleet, 10, 'a');
    const sessions = h.bridge.broker?.sessions;
    await eventually('the first 10 dropped', () => (sessions?.dropped.queue_full ?? 0) >= 10);
    const after30 = backend === 'redis' ? await persistenceBytes(aedesKeys) : undefined;
    const second = await fleetAsks(fleet, 20, 'b');
    await eventually('70 dropped', () => (sessions?.dropped.queue_full ?? 0) >= 70);
    expect(sessions?.dropped.queue_full).toBe(70);
    if (after30) {
      const after90 = await persistenceBytes(aedesKeys);
      expect(after90.packets).toBeLessThanOrEqual(20);
      expect(await redis.llen(`${aedesKeys}outgoing:${scada}`)).toBe(20);
      // Three times the replies, the same storage (payloads of one size, within 25 %).
      expect(after90.bytes).toBeLessThan(after30.bytes * 1.25);
    }
    await eventually('the gauge sampled', () => sessions?.offlineMessages === 20, 12_000);
    const metrics = await (await fetch(`http://127.0.0.1:${h.bridge.httpPort}/metrics`)).text();
    expect(metrics).toMatch(/^edge_ai_bridge_offline_messages 20$/m);
    expect(metrics).toMatch(/^edge_ai_bridge_offline_messages_dropped_total\{reason="queue_full"\} 70$/m);
    const back = await connect(h, scada, { clean: false, username: SCADA.username, password: SCADA.password });
    expect(back.sessionPresent).toBe(true);
    const newest = [...first, ...second].slice(-20);
    await eventually('the 20 newest replies', () => back.replies.length >= 20);
    expect(back.replies.map((r) => r.id)).toEqual(newest);
    if (backend === 'redis') await eventuallyAsync('the queue acknowledged', async () => (await redis.llen(`${aedesKeys}outgoing:${scada}`)) === 0, 5000);
    expect(back.replies).toHaveLength(20);
    expect(await readyz(h.bridge.httpPort)).toBe(200);
  });

  it('does not deliver messages older than OFFLINE_MESSAGE_TTL_S to a returning session', async () => {
    const { h, aedesKeys } = await start(backend, { OFFLINE_MESSAGE_TTL_S: '1' });
    const scada = `scada-${suffix()}`;
    await offlineObserver(h, scada);
    const device = await h.device(`fleet-${suffix()}`);
    await fleetAsks([device], 5, 'old');
    const queuedAt = Date.now();
    if (backend === 'redis') {
      // Redis forgets them by itself: their packets carry the expiry.
      await eventuallyAsync('the packets expired in Redis', async () => (await persistenceBytes(aedesKeys)).packets === 0, 4000);
    } else {
      await eventually('OFFLINE_MESSAGE_TTL_S passed', () => Date.now() > queuedAt + 1100, 3000);
    }
    const back = await connect(h, scada, { clean: false, username: SCADA.username, password: SCADA.password });
    expect(back.sessionPresent).toBe(true);
    // A reply sent now arrives after whatever was queued: only it arrives.
    await fleetAsks([device], 1, 'new');
    await eventually('the fresh reply', () => back.replies.length >= 1);
    expect(back.replies.map((r) => r.id)).toEqual([`new-${device.deviceId}-0`]);
    expect(h.bridge.broker?.sessions.dropped.expired).toBe(5);
  });

  it('ends a 3.1.1 persistent session absent longer than MAX_SESSION_EXPIRY_S, with its subscriptions and queue', async () => {
    // Long enough for the two replies to be queued before the session may expire, on a busy machine too.
    const { h, aedesKeys } = await start(backend, { MAX_SESSION_EXPIRY_S: '4' });
    const scada = `scada-${suffix()}`;
    const device = await h.device(`fleet-${suffix()}`);
    await offlineObserver(h, scada);
    await fleetAsks([device], 2, 'queued');
    if (backend === 'redis') {
      expect(await redis.llen(`${aedesKeys}outgoing:${scada}`)).toBe(2);
      expect(await redis.exists(`${aedesKeys}client:${scada}`)).toBe(1);
    }
    const sessions = h.bridge.broker?.sessions;
    await eventually('the session expired', () => (sessions?.expired ?? 0) >= 1, 15_000);
    expect(sessions?.expired).toBe(1);
    if (backend === 'redis') {
      const left = await persistenceBytes(aedesKeys);
      expect(left.packets).toBe(0);
      expect(await redis.exists(`${aedesKeys}client:${scada}`, `${aedesKeys}outgoing:${scada}`)).toBe(0);
      expect(await redis.sismember(`${aedesKeys}clients`, scada)).toBe(0);
      expect(await redis.zscore(`${aedesKeys}bridge:sessions`, scada)).toBeNull();
    }
    const back = await connect(h, scada, { clean: false, username: SCADA.username, password: SCADA.password });
    expect(back.sessionPresent).toBe(false);
    await fleetAsks([device], 1, 'after');
    expect(back.replies).toEqual([]);
    expect(await readyz(h.bridge.httpPort)).toBe(200);
  });
});

describe('persistent sessions from before the bounds (redis)', () => {
  it('expires the persistent sessions kept by a version without these bounds, from its first start', async () => {
    const before = await start('redis', {});
    const scada = `scada-${suffix()}`;
    await offlineObserver(before.h, scada);
    // What 0.8 left: the broker's keys, none of the register's.
    await redis.del(`${before.aedesKeys}bridge:sessions`, `${before.aedesKeys}bridge:device:${scada}`);
    harnesses.splice(harnesses.indexOf(before.h), 1);
    await before.h.close();
    const { h, aedesKeys } = await start('redis', { MAX_SESSION_EXPIRY_S: '2' }, before.prefix);
    expect(await redis.zscore(`${aedesKeys}bridge:sessions`, scada)).not.toBeNull();
    await eventually('the kept session expired', () => (h.bridge.broker?.sessions.expired ?? 0) >= 1, 15_000);
    expect(await redis.exists(`${aedesKeys}client:${scada}`)).toBe(0);
  });
});

async function eventuallyAsync(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
