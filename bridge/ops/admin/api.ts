// The operator API (/v1/ of the admin HTTP) over the store and the broker port.
import { deviceIdOfClientId, type Priority } from '../../../contract/index.js';
import type { Budgets } from '../../config/budgets.js';
import type { Store } from '../../store/port.js';
import { budgetReport } from '../budgets-report.js';
import type { AdminApi } from './server.js';

const HOUR_MS = 3_600_000;

export interface AdminApiSources {
  store: Pick<Store, 'operations'>;
  /** Where a replayed dead letter goes in the queue (PRIORITY_OFFSETS_MS). */
  priorityOffsetsMs: Record<Priority, number>;
  /** Tells the scheduler replayed work is waiting. */
  wake(): void;
  /** MQTT clients connected to this instance. */
  clientIds(): string[];
  /** The CONFIG_FILE budgets in use (SIGHUP may replace them). */
  budgets: () => Budgets;
}

export function adminApi({ store, priorityOffsetsMs, wake, clientIds, budgets }: AdminApiSources): AdminApi {
  return {
    deadLetters: async (limit, after) => {
      const now = Date.now();
      const [page, { count }] = await Promise.all([store.operations.deadLetters.page(limit, after, now), store.operations.deadLetters.stats(now)]);
      return { ...page, count };
    },
    deadLetter: (key) => store.operations.deadLetters.get(key, Date.now()),
    replay: async (keys) => {
      const now = Date.now();
      const count =
        keys === 'all'
          ? await store.operations.deadLetters.replayAll(priorityOffsetsMs, now)
          : await store.operations.deadLetters.replay(keys, priorityOffsetsMs, now);
      if (count > 0) wake();
      return count;
    },
    purge: () => store.operations.deadLetters.purge(),
    usage: (hours) => {
      const now = Date.now();
      return store.operations.usage(now - hours * HOUR_MS, now);
    },
    devices: () => devicesOf(clientIds()),
    budgets: () => budgetReport(budgets(), store.operations, Date.now()),
  };
}

/** Client ids grouped by the device they belong to (null: not a device's client id). */
export function devicesOf(clientIds: string[]): Array<{ deviceId: string | null; clientIds: string[] }> {
  const byDevice = new Map<string | null, string[]>();
  for (const id of clientIds) {
    const deviceId = deviceIdOfClientId(id);
    const list = byDevice.get(deviceId);
    if (list) list.push(id);
    else byDevice.set(deviceId, [id]);
  }
  return [...byDevice].map(([deviceId, ids]) => ({ deviceId, clientIds: ids.sort() }));
}
