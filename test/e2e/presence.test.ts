// Instance presence on a real Redis: an instance is "alone" (and its broker then skips Redis
// pub/sub) only while a recent count says so, and every other instance has stopped believing
// it is alone by the time a newcomer's join() returns. Then, end to end: a lone instance
// sends its publishes nowhere near Redis, and a second instance makes both go through it again.
import { afterEach, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Presence } from '../../bridge/store/presence.js';
import { createLogger } from '../../bridge/logger.js';
import { storeOutage } from '../../bridge/store/outage.js';
import { redisKeys } from '../../bridge/store/redis-keys.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { ask } from '../helpers/harness.js';
import { logSink } from '../helpers/log-sink.js';
import { connectRedis, REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const logger = createLogger('silent');
const cleanup: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => undefined);
});

function query(): Redis {
  const redis = connectRedis();
  cleanup.push(async () => redis.disconnect());
  return redis;
}

async function join(prefix: string, name: string, redis = query(), log = logger): Promise<Presence> {
  const presence = await Presence.join({
    query: redis,
    openMarker: (options) => new Redis(REDIS_URL, options),
    channel: redisKeys(prefix).instances,
    connectionName: `${prefix}:${name}`,
    logger: log,
    report: storeOutage(log),
  });
  cleanup.push(() => presence.leave());
  return presence;
}

describe('Presence', () => {
  it('is alone by itself, and not alone once a second instance has joined', async () => {
    const prefix = uniquePrefix('presence');
    const first = await join(prefix, 'one');
    expect(first.alone).toBe(true);
    expect(first.instances).toBe(1);
    const second = await join(prefix, 'two');
    // The safety property: when the newcomer may start its broker, nobody believes it is alone.
    expect(first.alone).toBe(false);
    expect(second.alone).toBe(false);
    expect([first.instances, second.instances]).toEqual([2, 2]);
    await second.leave();
    await expect.poll(() => first.alone, { timeout: 3000 }).toBe(true);
    expect(first.instances).toBe(1);
  });

  it('logs a line when the count changes, not on every poll', async () => {
    const prefix = uniquePrefix('presence');
    const sink = logSink();
    const first = await join(prefix, 'one', query(), createLogger('info', sink.stream));
    const second = await join(prefix, 'two');
    await second.leave();
    await expect.poll(() => first.alone, { timeout: 3000 }).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 600)); // a few more polls, same count
    expect(sink.lines().map((l) => [l.msg, l.instances])).toEqual([
      ['alone on this Redis: publishes are delivered here', 1],
      ['instances on this Redis: publishes go through Redis pub/sub', 2],
      ['alone on this Redis: publishes are delivered here', 1],
    ]);
  });

  it('does not count instances of another deployment prefix', async () => {
    const one = await join(uniquePrefix('presence'), 'one');
    const other = await join(uniquePrefix('presence'), 'other');
    expect(one.alone).toBe(true);
    expect(other.alone).toBe(true);
  });

  it('is not alone while it cannot count, and alone again once it can', async () => {
    const redis = query();
    const presence = await join(uniquePrefix('presence'), 'one', redis);
    expect(presence.alone).toBe(true);
    redis.disconnect();
    await expect.poll(() => presence.alone, { timeout: 3000 }).toBe(false);
    expect(presence.instances).toBeUndefined();
    await redis.connect();
    await expect.poll(() => presence.alone, { timeout: 3000 }).toBe(true);
  });

  it('is not alone while its own marker is disconnected, and alone again once it resubscribed', async () => {
    const prefix = uniquePrefix('presence');
    const presence = await join(prefix, 'one');
    const admin = query();
    // Another instance's marker alone would also count 1: a missing own marker must not pass for "alone".
    const list = (await admin.client('LIST')) as string;
    const marker = list.split('\n').find((line) => line.includes(` name=${prefix}:one `));
    const markerId = /^id=(\d+) /.exec(marker ?? '')?.[1];
    expect(markerId).toBeDefined();
    // Sampled on every turn of the event loop: the reconnect takes some tens of milliseconds.
    const seen: boolean[] = [];
    const deadline = Date.now() + 5000;
    await admin.client('KILL', 'ID', markerId!);
    while (Date.now() < deadline && !(seen.includes(false) && seen.at(-1) === true)) {
      seen.push(presence.alone);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(seen).toContain(false);
    expect(seen.at(-1)).toBe(true);
  });
});

describe('a lone instance on Redis', () => {
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
  });

  it('delivers its publishes itself, and through Redis again once a second instance joins', async () => {
    fleet = await startFleet(1);
    const spy = query();
    const seen: string[] = [];
    spy.on('pmessage', (_pattern: string, channel: string) => seen.push(channel));
    await spy.psubscribe(`{${fleet.prefix}}:mqtt/devices/*`);

    const [one] = fleet.instances as [NonNullable<Fleet['instances'][0]>];
    const cam = await one.device('cam-alone');
    await cam.publish('normal', ask('r-1', 'alone'));
    expect((await cam.reply('r-1'))[0]).toMatchObject({ id: 'r-1', ok: true });
    expect(seen).toEqual([]);

    await fleet.add();
    await cam.publish('normal', ask('r-2', 'together'));
    expect((await cam.reply('r-2'))[0]).toMatchObject({ id: 'r-2', ok: true });
    await expect
      .poll(() => seen)
      .toEqual(expect.arrayContaining([`{${fleet.prefix}}:mqtt/devices/cam-alone/infer/normal`, `{${fleet.prefix}}:mqtt/devices/cam-alone/result`]));
  });
});
