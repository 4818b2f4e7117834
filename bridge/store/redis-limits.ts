// The Redis store's limits and budgets: device quotas, the upstream's shared rate (RPM, TPM,
// a 429's pause) and budget settlements, the same for every instance.
import type { BudgetCharge } from '../model/budget-charge.js';
import type { RedisSpend } from './budget-spend.js';
import type { RedisSteps } from './redis-steps.js';
import type { Limits, QuotaCharge, RateTake } from './port.js';

export class RedisLimits implements Limits {
  constructor(
    private readonly steps: RedisSteps,
    private readonly spend: RedisSpend,
  ) {}

  async chargeQuota(deviceId: string, rpm: number, now: number): Promise<QuotaCharge> {
    const k = this.steps.keys;
    const [kind, wait] = (await this.steps.run('quota', [k.quota(deviceId)], [k.base, rpm, now])) as [string, string?];
    return kind === 'ok' ? { ok: true } : { ok: false, retryAfterMs: Number(wait) };
  }

  async takeRate(tokens: number, rpm: number, tpm: number | undefined, now: number): Promise<RateTake> {
    const k = this.steps.keys;
    const [ok, idOrAt] = (await this.steps.run('take-rate', [k.queue], [k.base, tokens, rpm, tpm ?? '', now])) as [number, string];
    return ok === 1 ? { ok: true, callId: idOrAt } : { ok: false, retryAtMs: Number(idOrAt) };
  }

  async settleTokens(callId: string, tokens: number): Promise<void> {
    const k = this.steps.keys;
    await this.steps.run('settle', [k.queue], [k.base, callId, Math.max(0, Math.round(tokens))]);
  }

  async pauseUpstream(untilMs: number): Promise<void> {
    const k = this.steps.keys;
    await this.steps.run('pause', [k.queue], [k.base, untilMs, Date.now()]);
  }

  settleBudgets(settled: Array<{ charge: BudgetCharge; used: number }>): Promise<void> {
    return this.spend.settle(settled);
  }
}
