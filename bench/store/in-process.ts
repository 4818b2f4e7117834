// A scenario run inside this process: the memory store, or one or two Redis connections each
// with its own RedisStore on the scenario's prefix.
import type { Redis } from 'ioredis';
import { MemoryStore } from '../../bridge/store/memory.js';
import { deleteDeployment } from '../../bridge/store/redis-keys.js';
import { RedisStore } from '../../bridge/store/redis.js';
import type { Store } from '../../bridge/store/port.js';
import { runInstance, type Coordinator, type Mode } from './instance.js';
import { connect, countCalls, cpuSeconds, machineBusy, machineTicks, serverSnapshot } from './meters.js';
import { FAIR_SHARE, WARMUP_JOBS, type Sizes } from './options.js';
import { toRow, type Row, type Scenario } from './scenarios.js';

/** Admit/claim/complete a few jobs under a throwaway prefix: loads the scripts, warms the JIT. */
export async function warmUp(redis: Redis, prefix: string, mode: Mode, sizes: Sizes): Promise<void> {
  const store = new RedisStore(redis, { prefix, fairShare: FAIR_SHARE });
  let done = false;
  const co: Coordinator = { allAdmitted: () => done, admitsDone: () => void (done = true) };
  await runInstance(store, 'warmup', mode, { first: 0, step: 1, total: WARMUP_JOBS }, co, sizes);
  await deleteDeployment(redis, prefix);
}

async function openStores(s: Scenario, prefix: string, sizes: Sizes): Promise<{ stores: Store[]; connections: Redis[] }> {
  if (s.store === 'memory') return { stores: [new MemoryStore({ fairShare: FAIR_SHARE })], connections: [] };
  const connections: Redis[] = [];
  const stores: Store[] = [];
  for (let n = 0; n < s.instances; n++) {
    const redis = await connect(sizes.redisUrl, s.autoPipelining);
    await warmUp(redis, `${prefix}-warm${n}`, s.mode, sizes);
    connections.push(redis);
    stores.push(new RedisStore(redis, { prefix, fairShare: FAIR_SHARE }));
  }
  return { stores, connections };
}

export async function runInProcess(s: Scenario, prefix: string, admin: Redis | undefined, sizes: Sizes): Promise<Row> {
  const { stores, connections } = await openStores(s, prefix, sizes);
  const counters = connections.map(countCalls);
  let admitting: number = s.instances;
  const co: Coordinator = { allAdmitted: () => admitting === 0, admitsDone: () => void (admitting -= 1) };

  const before = admin ? await serverSnapshot(admin) : undefined;
  const cpu0 = process.cpuUsage();
  const ticks0 = machineTicks();
  const t0 = performance.now();
  const results = await Promise.all(
    stores.map((store, n) => runInstance(store, `bench-${n}`, s.mode, { first: n, step: s.instances, total: sizes.jobs }, co, sizes)),
  );
  const seconds = (performance.now() - t0) / 1000;
  const clientCpuS = cpuSeconds(process.cpuUsage(cpu0));
  const machineBusyShare = machineBusy(ticks0, machineTicks());
  const after = admin ? await serverSnapshot(admin) : undefined;

  for (const redis of connections) redis.disconnect();
  return toRow(s, sizes.jobs, { seconds, results, counters, clientCpuS, machineBusyShare, before, after });
}
