// The Redis store as an operator reads it: queue depth and bytes, dead letters, usage and
// budget reports.
import { PRIORITIES } from '../../contract/index.js';
import type { BudgetPeriod, BudgetUse, RedisSpend } from './budget-spend.js';
import { addUsageFields } from './redis-codec.js';
import type { RedisDeadLetters } from './redis-dead-letters.js';
import type { RedisSteps } from './redis-steps.js';
import type { UsageBuffer } from './usage-buffer.js';
import { emptyReport, hoursBetween } from './usage-report.js';
import type { Operations, QueueDepth, UsageReport } from './port.js';

export class RedisOperations implements Operations {
  constructor(
    private readonly steps: RedisSteps,
    readonly deadLetters: RedisDeadLetters,
    private readonly spend: RedisSpend,
    private readonly usageBuffer: UsageBuffer,
  ) {}

  async queueDepth(): Promise<QueueDepth> {
    const raw = await this.steps.guard(this.steps.redis.hgetall(this.steps.keys.depth));
    return Object.fromEntries(PRIORITIES.map((p) => [p, Number(raw[p] ?? 0)])) as QueueDepth;
  }

  async queueBytes(): Promise<number> {
    return Number(await this.steps.guard(this.steps.redis.get(this.steps.keys.qbytes)));
  }

  async usage(fromMs: number, toMs: number): Promise<UsageReport> {
    await this.usageBuffer.flush(); // this instance's own counts included
    const report = emptyReport(fromMs, toMs);
    const pipeline = this.steps.redis.pipeline();
    for (const hour of hoursBetween(fromMs, toMs)) pipeline.hgetall(this.steps.keys.usage(String(hour)));
    const results = (await this.steps.guard(pipeline.exec())) ?? [];
    for (const [, fields] of results) addUsageFields(report, (fields ?? {}) as Record<string, string>);
    return report;
  }

  budgetUse(periods: BudgetPeriod[]): Promise<BudgetUse[]> {
    return this.steps.guard(this.spend.use(periods));
  }
}
