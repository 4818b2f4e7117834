// The dashboard's data over the store, this instance's recorder and broker, and (on Redis)
// the other instances: what dashboard/http.ts serves.
import { deviceIdOfClientId } from '../../../contract/index.js';
import { periodAt } from '../../intake/budget-period.js';
import type { Store } from '../../store/port.js';
import type { Dashboard } from './dashboard.js';
import type { DashboardApi } from './http.js';
import type { DeviceView } from './model.js';
import type { DashboardRecorder } from './recorder.js';

const HOUR_MS = 3_600_000;
/** Devices a search answers with. */
export const MAX_DEVICES = 20;

export interface DashboardApiSources {
  dashboard: Dashboard;
  store: Pick<Store, 'operations'>;
  recorder: DashboardRecorder;
  instance: string;
  /** MQTT clients connected to this instance. */
  clientIds(): string[];
  /** ADMIN_TOKEN is set. */
  tokenSet: boolean;
  /** HTTP_HOST is a loopback address. */
  loopback: boolean;
  /** The budgets' time zone (CONFIG_FILE `budgets.timeZone`, UTC by default), read per request: SIGHUP may change it. */
  timeZone(): string;
  /** The other instances' answers to a device search (Redis); none in memory mode. */
  askFleet?(query: string): Promise<DeviceView[]>;
  clock?: () => number;
}

export function dashboardApi(sources: DashboardApiSources): DashboardApi {
  const clock = sources.clock ?? Date.now;
  return {
    dashboard: sources.dashboard,
    access: { open: !sources.tokenSet && sources.loopback, actions: sources.tokenSet },
    usage: async () => {
      const now = clock();
      // "Today" is the budgets' day, so the page's figures and a daily budget's count agree.
      const timeZone = sources.timeZone();
      const midnight = periodAt('day', timeZone, now).startMs;
      const [today, last24h] = await Promise.all([sources.store.operations.usage(midnight, now), sources.store.operations.usage(now - 24 * HOUR_MS, now)]);
      return { timeZone, today, last24h };
    },
    devices: async (query) => {
      const fleet = sources.askFleet ? await sources.askFleet(query) : [];
      return mergeDevices([...localDevices(sources, query), ...fleet]);
    },
    deadLetters: async (limit, after) => {
      const now = clock();
      const [page, { count }] = await Promise.all([
        sources.store.operations.deadLetters.page(limit, after, now),
        sources.store.operations.deadLetters.stats(now),
      ]);
      return { ...page, count };
    },
    deadLetter: (key) => sources.store.operations.deadLetters.get(key, clock()),
  };
}

/** This instance's devices whose id contains `query`: those connected, and those it answered. */
export function localDevices({ recorder, clientIds, instance }: Pick<DashboardApiSources, 'recorder' | 'clientIds' | 'instance'>, query: string): DeviceView[] {
  const q = query.toLowerCase();
  const byId = new Map<string, DeviceView>();
  const entry = (deviceId: string): DeviceView => {
    let view = byId.get(deviceId);
    if (!view) byId.set(deviceId, (view = { deviceId, connections: [], recent: [] }));
    return view;
  };
  for (const clientId of clientIds()) {
    const deviceId = deviceIdOfClientId(clientId);
    if (deviceId !== null && deviceId.toLowerCase().includes(q)) entry(deviceId).connections.push({ clientId, instance });
  }
  for (const { deviceId, recent } of recorder.recentOf(query, MAX_DEVICES)) entry(deviceId).recent = recent;
  return [...byId.values()];
}

/** One view per device from several instances' answers: connections joined, requests newest first. */
export function mergeDevices(views: DeviceView[]): DeviceView[] {
  const byId = new Map<string, DeviceView>();
  for (const v of views) {
    const seen = byId.get(v.deviceId);
    if (!seen) byId.set(v.deviceId, { deviceId: v.deviceId, connections: [...v.connections], recent: [...v.recent] });
    else {
      seen.connections.push(...v.connections);
      seen.recent.push(...v.recent);
    }
  }
  const merged = [...byId.values()].sort((a, b) => a.deviceId.localeCompare(b.deviceId)).slice(0, MAX_DEVICES);
  for (const v of merged) v.recent = v.recent.sort((a, b) => b.at - a.at).slice(0, 20);
  return merged;
}
