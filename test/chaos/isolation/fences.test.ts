// Finding: the fences hash never shrank. Every lock name a device ever sent left a field in
// Redis ({p}:fences, lock → last fencing number), so a device naming a fresh lock per request
// grew the deployment's memory without end. Now every grant draws from one counter: after an
// attacker's 400 distinct lock names the fence state is that one number, nothing in Redis
// names a lock, an innocent device on another instance is answered ok, and a lock's fences
// still rise.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisKeys } from '../../../bridge/store/redis-keys.js';
import { ask, startHarness, type Harness } from '../../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { readUntil } from '../../helpers/wait.js';

const LOCK_NAMES = 400;
/** The innocent device's answer, with the attacker's requests queued ahead of it. */
const INNOCENT_BOUND_MS = 10_000;

describe('isolation: many distinct lock names', () => {
  const redis = connectRedis();
  const prefix = uniquePrefix('iso-fences');
  const k = redisKeys(prefix);
  // Named here, not from redisKeys: the same test ran on 0.7, whose fences were a hash.
  const oldFences = `{${prefix}}:fences`;
  const fence = `{${prefix}}:fence`;
  const env = { REDIS_URL, REDIS_PREFIX: prefix, DEVICE_RATE_LIMIT_RPM: '10000', RATE_LIMIT_RPM: '100000' };
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    a = await startHarness(env);
    b = await startHarness(env, {}, undefined, { upstream: a.upstream });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it(`keeps one fence number in Redis after ${LOCK_NAMES} lock names, and still serves an innocent device`, { timeout: 60_000 }, async () => {
    const attacker = await a.device('attacker');
    const innocent = await b.device('innocent');
    const ids = Array.from({ length: LOCK_NAMES }, (_, i) => `l${i}`);
    await Promise.all(ids.map((id, i) => attacker.publish('normal', ask(id, `x ${id}`, { lock: `line-${i}-${prefix}` }))));

    const started = Date.now();
    await innocent.publish('normal', ask('fine', 'hello', { lock: 'press-1' }));
    expect((await innocent.reply('fine', { timeoutMs: INNOCENT_BOUND_MS }))[0]).toMatchObject({ ok: true });
    expect(Date.now() - started).toBeLessThan(INNOCENT_BOUND_MS);
    for (const id of ids) expect((await attacker.reply(id, { timeoutMs: 30_000 }))[0]?.ok).toBe(true);

    // The bound: one string for every lock ever granted; no key or field names a lock.
    expect(await redis.exists(oldFences)).toBe(0);
    expect(await redis.type(fence)).toBe('string');
    expect(Number(await redis.get(fence))).toBe(LOCK_NAMES + 1);
    // A job's lock is released just after its reply is published: give the last one a moment.
    const held = async (): Promise<number> => (await redis.hlen(k.locks)) + (await redis.zcard(k.parked));
    await readUntil(held, (n) => n === 0, 2000, 20);
    expect(await redis.hlen(k.locks)).toBe(0);
    expect(await redis.zcard(k.parked)).toBe(0);

    // A lock's next grant is still above everything granted before it.
    await innocent.publish('normal', ask('again', 'hello again', { lock: 'press-1' }));
    expect((await innocent.reply('again'))[0]).toMatchObject({ ok: true });
    const fences = a.upstream.requests.filter((r) => r.headers['x-lock-key'] === 'press-1').map((r) => Number(r.headers['x-lock-fence']));
    expect(fences).toHaveLength(2);
    expect(fences[1]).toBe(LOCK_NAMES + 2);
    expect(fences[1]).toBeGreaterThan(fences[0] as number);
    for (const h of [a, b]) expect((await fetch(`http://127.0.0.1:${h.bridge.httpPort}/readyz`)).status).toBe(200);
  });
});
