// A bridge (in process, Redis, a real Mosquitto) adopts a dead member of its share group: the
// requests waiting in the dead session go through the usual intake, new ones are answered once,
// and a repeat of a request the bridge had already answered is not answered again from there
// (an adopted session's requests count as redeliveries), while the repeats that reached the
// bridge's own connection still get the stored reply (guarantee 2).
import { randomBytes } from 'node:crypto';
import mqtt from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { startBridge, type RunningBridge } from '../../bridge/app.js';
import { loadConfig } from '../../bridge/config/config.js';
import { createLogger } from '../../bridge/logger.js';
import { sharedSubscriptions } from '../../bridge/mqtt/external.js';
import { RedisSessionRegistry } from '../../bridge/store/redis-session-registry.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { connectDevice, type Device } from '../helpers/harness.js';
import { logSink } from '../helpers/log-sink.js';
import { startMosquitto, type Mosquitto } from '../helpers/mosquitto.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { waitUntil } from '../helpers/wait.js';

const redis = connectRedis();
const stops: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
});

const ask = (id: string) => ({ id, messages: [{ role: 'user', content: id }] });

describe('a bridge adopting a dead member of its share group', () => {
  it('answers what waited in the dead session once, and does not answer again what it had answered', { timeout: 30_000 }, async () => {
    const mq: Mosquitto = await startMosquitto();
    stops.push(() => mq.close());
    const upstream: UpstreamSim = await startUpstreamSim({ port: 0, latencyMs: 5 });
    stops.push(() => upstream.close());
    const prefix = uniquePrefix('adopt');
    stops.push(async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });
    const group = `g-${randomBytes(3).toString('hex')}`;
    const env = { BROKER_URL: mq.url, BROKER_SHARE_GROUP: group, BROKER_CONNECTIONS: '1', BROKER_ADOPT_AFTER_MS: '1000', INSTANCE_ID: 'live' };
    const config = loadConfig({ ...env, REDIS_URL, REDIS_PREFIX: prefix, HTTP_PORT: '0', OVERLOAD_DELAY_MS: '0', LOG_LEVEL: 'info' });
    const sink = logSink();
    const bridge: RunningBridge = await startBridge({ ...config, upstreamUrl: upstream.url }, createLogger('info', sink.stream));
    stops.push(() => bridge.shutdown());
    const logged = (msg: string) => sink.lines().filter((l) => typeof l.msg === 'string' && l.msg.startsWith(msg));
    expect(await waitUntil(() => logged('subscribed').length > 0, 5000)).toBe(true);
    const device: Device = await connectDevice(mq.url, 'cam-1');
    stops.push(() => device.close());
    await device.publish('normal', ask('r1'), 1);
    await device.reply('r1');

    // A member of the group whose lease lapses at once: it dies holding its session.
    const ghost = mqtt.connect(mq.url, { clientId: 'ghost', protocolVersion: 5, clean: false, reconnectPeriod: 0, properties: { sessionExpiryInterval: 300 } });
    await new Promise((resolve) => ghost.once('connect', resolve));
    await ghost.subscribeAsync(sharedSubscriptions(group)[0] as string, { qos: 1 });
    await new RedisSessionRegistry(redis, prefix).join({ instanceId: 'ghost', group, clientIds: ['ghost'], sessionExpiryS: 300 }, 1000);
    ghost.stream.destroy();
    expect(await waitUntil(() => mq.logs().includes('Client ghost closed its connection'), 5000)).toBe(true); // the broker knows it is gone
    const fresh = ['r2', 'r3', 'r4', 'r5', 'r6', 'r7'];
    for (let i = 0; i < 6; i += 1) await device.publish('normal', ask('r1'), 1);
    for (const id of fresh) await device.publish('normal', ask(id), 1);

    const adopted = await waitUntil(() => logged('adopted the broker sessions').length > 0, 10_000);
    await waitUntil(() => fresh.every((id) => device.replies.some((r) => r.id === id)), 5000);
    const repliesTo = (id: string): number => device.replies.filter((r) => r.id === id).length;
    // Every repeat handled, each one way or the other: its stored reply here, or not answered again.
    await waitUntil(() => repliesTo('r1') - 1 + logged('redelivery of an answered request').length >= 6, 5000);
    const notAgain = logged('redelivery of an answered request').length;
    expect(adopted).toBe(true);
    expect(Number(logged('adopted the broker sessions')[0]?.received)).toBeGreaterThan(0);
    // Some repeats waited in the dead session: admitted there, not answered again.
    expect(notAgain).toBeGreaterThan(0);
    // The first answer, then the stored reply once per repeat that reached the bridge itself.
    expect(repliesTo('r1')).toBe(1 + 6 - notAgain);
    expect(fresh.map(repliesTo)).toEqual(fresh.map(() => 1));
  });
});
