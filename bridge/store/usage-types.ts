// What the store keeps of every answered call for usage and cost reports (recordUsage, usage).
// names.js, not the contract's index: the dashboard page's type check reads this file without Node's types.
import type { Priority } from '../../contract/names.js';

/** Tokens and estimated cost, as totals. */
export interface UsageTotals {
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
}

export interface UsageRecord {
  deviceId: string;
  model: string;
  priority: Priority;
  /** The CONFIG_FILE template the request was rendered from, if it was. */
  template?: string | undefined;
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
  /**
   * Fair share: the real charge minus the estimate its claim charged, added to the device's
   * counter in the class while it is still waiting there.
   */
  fairDelta?: number | undefined;
}

export interface UsageReport {
  fromMs: number;
  toMs: number;
  total: UsageTotals;
  byDevice: Record<string, UsageTotals>;
  byModel: Record<string, UsageTotals>;
  byPriority: Record<string, UsageTotals>;
  /** Requests rendered from a CONFIG_FILE template, by its name (the others are not in it). */
  byTemplate: Record<string, UsageTotals>;
}

export const HOUR_MS = 3_600_000;
