// Several bridge instances in this process on one Redis deployment prefix, each with its own
// broker and ports, all sharing ONE upstream simulator (so the test sees every upstream call
// of the fleet in one place, with arrival and answer times).
import { startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../upstream-sim/sim.js';
import { startHarness, type Harness, type HarnessOptions } from './harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from './redis.js';

export interface Fleet {
  /** The deployment prefix every instance uses (fresh per fleet). */
  prefix: string;
  upstream: UpstreamSim;
  /** Running instances, in start order (a stopped one is removed). */
  instances: Harness[];
  /** Starts one more instance on the same prefix; `env` adds to (or overrides) the fleet's. */
  add(env?: Record<string, string>): Promise<Harness>;
  /** Stops one instance (its devices disconnect, then SIGTERM semantics) and forgets it. */
  stop(instance: Harness): Promise<void>;
  /** Stops every instance and the upstream, then deletes the prefix's keys. */
  close(): Promise<void>;
}

export async function startFleet(
  size: number,
  env: Record<string, string> = {},
  sim: Partial<UpstreamSimOptions> = {},
  harness: Omit<HarnessOptions, 'upstream'> = {},
): Promise<Fleet> {
  const prefix = uniquePrefix('fleet');
  const upstream = await startUpstreamSim({ port: 0, latencyMs: 5, ...sim });
  const instances: Harness[] = [];
  const fleetEnv = { ...env, REDIS_URL, REDIS_PREFIX: prefix };

  const fleet: Fleet = {
    prefix,
    upstream,
    instances,
    async add(extra = {}) {
      const h = await startHarness({ ...fleetEnv, ...extra }, {}, undefined, { ...harness, upstream });
      instances.push(h);
      return h;
    },
    async stop(instance) {
      const i = instances.indexOf(instance);
      if (i >= 0) instances.splice(i, 1);
      await instance.close();
    },
    async close() {
      const errors: unknown[] = [];
      for (const h of instances.splice(0)) await h.close().catch((err: unknown) => errors.push(err));
      await upstream.close();
      const redis = connectRedis();
      try {
        await deletePrefix(redis, prefix);
      } finally {
        redis.disconnect();
      }
      if (errors.length > 0) throw errors[0];
    },
  };
  try {
    for (let i = 0; i < size; i += 1) await fleet.add();
  } catch (err) {
    await fleet.close().catch(() => undefined);
    throw err;
  }
  return fleet;
}
