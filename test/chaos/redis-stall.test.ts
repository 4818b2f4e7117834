// Chaos: a stalled, then partitioned Redis. A TCP proxy of the test's own between the bridge
// and Redis stops forwarding for 8 s without closing anything (a stall), then closes every
// connection and refuses new ones for 5 s (a partition), then heals. The bridge must notice
// the stall within REDIS_TIMEOUT_MS (readiness 503, new requests answered `unavailable`
// promptly rather than held), and after the heal answer every acknowledged request, never
// two ways, and be ready again by itself.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { startServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim } from '../../upstream-sim/sim.js';
import { chaosScene, connectChaosDevice, readyz, steadyLoad, waitUntil, type ChaosDevice } from '../helpers/chaos.js';
import { connectRedis, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

const redis = connectRedis();
const REDIS_TIMEOUT_MS = 2000;
const STALL_MS = 8000;
const PARTITION_MS = 5000;
/** The steady load before the fault, and how often readiness is sampled throughout. */
const STEADY_MS = 2000;
const PROBE_EVERY_MS = 200;
/** How soon after the heal the bridge must be ready again, by itself. */
const READY_AGAIN_MS = 5000;

const scene = chaosScene(redis);

describe('chaos: Redis stalls, then partitions, then heals', () => {
  it('is unready and answers `unavailable` promptly while Redis is out of reach, then answers every acknowledged request', { timeout: 90_000 }, async () => {
    const prefix = (scene.prefix = uniquePrefix('chaos-stall'));
    const upstream = (scene.upstream = await startUpstreamSim({ port: 0, latencyMs: 100 }));
    const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
    scene.closers.push(() => proxy.close());
    const service = await startServiceProcess({
      REDIS_URL: proxy.url,
      REDIS_PREFIX: prefix,
      UPSTREAM_URL: upstream.url,
      REDIS_TIMEOUT_MS: String(REDIS_TIMEOUT_MS),
      RATE_LIMIT_RPM: '100000',
      DEVICE_RATE_LIMIT_RPM: '100000',
    });
    scene.services.push(service);
    const tag = randomBytes(3).toString('hex');
    const devices = (scene.devices = await Promise.all([
      connectChaosDevice(service.mqttPort, `stall-${tag}-a`, { clean: true, reconnectPeriod: 200 }),
      connectChaosDevice(service.mqttPort, `stall-${tag}-b`, { clean: false, reconnectPeriod: 200 }),
    ]));

    const load = steadyLoad(devices, 100);
    let probing = true;
    const readiness: Array<[number, number]> = [];
    const prober = (async () => {
      while (probing) {
        readiness.push([Date.now(), await readyz(service.httpPort)]);
        await sleep(PROBE_EVERY_MS);
      }
    })();

    await sleep(STEADY_MS);
    const stallAt = Date.now();
    proxy.stall();
    await sleep(STALL_MS);
    const partitionAt = Date.now();
    await proxy.partition();
    await sleep(PARTITION_MS);
    const healAt = Date.now();
    await proxy.heal();
    await waitUntil(() => readiness.some(([t, status]) => t >= healAt && status === 200), READY_AGAIN_MS, 50);
    probing = false;
    await Promise.all([load.stop(), prober]);

    const { sent, repliesOf } = load;
    const acked = [...load.acknowledged];
    await waitUntil(() => acked.every((id) => repliesOf(id).length > 0), 20_000, 200);

    const missing = acked.filter((id) => repliesOf(id).length === 0);
    const differing = acked.filter((id) => new Set(repliesOf(id).map((r) => r.raw)).size > 1);
    const unreadyAt = readiness.find(([t, status]) => t >= stallAt && status !== 200)?.[0];
    const readyAgainAt = readiness.find(([t, status]) => t >= healAt && status === 200)?.[0];
    const inOutage = [...sent].filter(([, s]) => s.at >= stallAt + REDIS_TIMEOUT_MS && s.at < healAt);
    // How long a request sent while Redis was out of reach (and known to be) waited for its
    // reply, on the clean-session device: a persistent session's replies are queued in Redis
    // (Aedes' persistence) before they are delivered, so they wait for Redis to come back.
    const clean = devices[0] as ChaosDevice;
    const waits = inOutage.filter(([, s]) => s.device === clean).map(([id, s]) => (repliesOf(id)[0]?.at ?? Infinity) - s.at);
    const slowestOutage = Math.max(0, ...waits);
    const codes = [...new Set(inOutage.flatMap(([id]) => repliesOf(id).map((r) => r.code ?? 'ok')))];
    // No upstream attempt starts while the store cannot renew or grant a lease.
    const callsInOutage = upstream.requests.filter((r) => r.at >= stallAt + REDIS_TIMEOUT_MS && r.at < healAt).length;
    console.log(
      `[chaos redis stall] sent ${sent.size}, acknowledged ${acked.length}, missing ${missing.length}, two ways ${differing.length}; ` +
        `unready ${unreadyAt === undefined ? 'never' : `${unreadyAt - stallAt} ms after the stall`}, ` +
        `ready again ${readyAgainAt === undefined ? 'never' : `${readyAgainAt - healAt} ms after the heal`}; ` +
        `sent in the outage ${inOutage.length}, slowest reply ${slowestOutage} ms, codes ${codes.join(',')}, upstream calls ${callsInOutage}; ` +
        `partition at +${partitionAt - stallAt} ms`,
    );

    expect(missing).toEqual([]);
    expect(differing).toEqual([]);
    expect(unreadyAt).toBeDefined();
    expect((unreadyAt as number) - stallAt).toBeLessThanOrEqual(REDIS_TIMEOUT_MS + 1000);
    expect(readyAgainAt).toBeDefined();
    expect(slowestOutage).toBeLessThanOrEqual(REDIS_TIMEOUT_MS + 1000);
    expect(callsInOutage).toBe(0);
  });
});
