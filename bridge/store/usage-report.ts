// Usage totals by device, model, priority and template, and how hours of them add up. Shared by both
// stores so a report reads the same whichever one kept it.
import type { UsageRecord, UsageReport, UsageTotals } from './port.js';

export const USAGE_DIMENSIONS = ['byDevice', 'byModel', 'byPriority', 'byTemplate'] as const;
export type UsageDimension = (typeof USAGE_DIMENSIONS)[number];
export type UsageMetric = keyof UsageTotals;

export const emptyTotals = (): UsageTotals => ({ requests: 0, promptTokens: 0, completionTokens: 0, costUsd: 0 });

export function emptyReport(fromMs: number, toMs: number): UsageReport {
  return { fromMs, toMs, total: emptyTotals(), byDevice: {}, byModel: {}, byPriority: {}, byTemplate: {} };
}

/** The (dimension, name) pairs one record counts under. */
export function dimensionsOf(record: UsageRecord): Array<[UsageDimension, string]> {
  const dimensions: Array<[UsageDimension, string]> = [
    ['byDevice', record.deviceId],
    ['byModel', record.model],
    ['byPriority', record.priority],
  ];
  if (record.template !== undefined) dimensions.push(['byTemplate', record.template]);
  return dimensions;
}

export function metricsOf(record: UsageRecord): UsageTotals {
  return {
    requests: 1,
    promptTokens: record.promptTokens,
    completionTokens: record.completionTokens,
    costUsd: record.costUsd,
  };
}

/** Adds `value` of `metric` to one (dimension, name) and, for byDevice, to the total. */
export function addMetric(report: UsageReport, dimension: UsageDimension, name: string, metric: UsageMetric, value: number): void {
  const totals = (report[dimension][name] ??= emptyTotals());
  totals[metric] += value;
  // Every record counts once under each dimension; the device dimension feeds the total.
  if (dimension === 'byDevice') report.total[metric] += value;
}

export function addRecord(report: UsageReport, record: UsageRecord): void {
  const metrics = metricsOf(record);
  for (const [dimension, name] of dimensionsOf(record)) {
    for (const metric of Object.keys(metrics) as UsageMetric[]) addMetric(report, dimension, name, metric, metrics[metric]);
  }
}

export const hourOf = (ms: number): number => Math.floor(ms / 3_600_000) * 3_600_000;

/** Start times of the hours that [fromMs, toMs] touches. */
export function hoursBetween(fromMs: number, toMs: number): number[] {
  const hours: number[] = [];
  for (let h = hourOf(fromMs); h <= toMs; h += 3_600_000) hours.push(h);
  return hours;
}
