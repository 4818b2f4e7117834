// The composition root's dashboard part: its ticks (closed after the admin HTTP, which serves
// them), the fleet search over Redis, and the data its page reads.
import type { Core } from './core.js';
import { isLoopback } from './config/config.js';
import { dashboardApi, localDevices } from './ops/dashboard/api.js';
import { Dashboard } from './ops/dashboard/dashboard.js';
import { FleetSearch } from './ops/dashboard/fleet-search.js';
import type { DashboardApi } from './ops/dashboard/http.js';
import type { DeviceView } from './ops/dashboard/model.js';
import type { DashboardRecorder } from './ops/dashboard/recorder.js';
import type { ReadinessState } from './ops/readiness.js';
import { redisKeys } from './store/redis-keys.js';
import { VERSION } from './version.js';

/** The dashboard's ticks (closed after the admin HTTP, which serves them) and its data. */
export async function openDashboard(
  { config, identity, log, closers, coordination, upstream, mqtt, live }: Core,
  { recorder, tickMs, readiness, inFlight }: { recorder: DashboardRecorder; tickMs: number; readiness(): ReadinessState; inFlight(): number },
): Promise<DashboardApi> {
  const { instanceId } = identity;
  const dashboard = new Dashboard({
    instance: instanceId,
    version: VERSION,
    startedAt: Date.parse(identity.since),
    store: coordination.store,
    reports: coordination.reports,
    recorder,
    upstream,
    readiness,
    inFlight,
    connectedClients: () => mqtt.clientCount(),
    tickMs,
    logger: log.child({ module: 'dashboard' }),
  });
  dashboard.start();
  closers.push('dashboard', async () => dashboard.stop());
  const clientIds = (): string[] => mqtt.clientIds();
  const local = (query: string): DeviceView[] => localDevices({ recorder, clientIds, instance: instanceId }, query);
  const { redis } = coordination;
  const search = redis
    ? await FleetSearch.open({
        redis,
        channel: redisKeys(config.redisPrefix).deviceQuery,
        instance: instanceId,
        local,
        instances: () => coordination.instances(),
        logger: log,
      })
    : undefined;
  if (search) closers.push('dashboard search', () => search.close());
  return dashboardApi({
    dashboard,
    store: coordination.store,
    recorder,
    instance: instanceId,
    clientIds,
    tokenSet: config.adminToken !== undefined,
    loopback: isLoopback(config.httpHost),
    timeZone: () => live.budgets.timeZone,
    ...(search ? { askFleet: (q: string) => search.ask(q) } : {}),
  });
}
