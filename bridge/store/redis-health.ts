// Whether Redis answers, known within REDIS_TIMEOUT_MS whatever the failure: a closed
// connection shows at once, but a stalled one (a frozen Redis, a black-holed route) keeps
// its socket open and only silence tells. A probe asks Redis for its clock a few times per
// timeout; the store refuses new admissions at once while the last answer is older than the
// timeout, and the clock gives admissions a cutoff in Redis' own time (see admitCutoff).
import type { Redis } from 'ioredis';
import type { ConditionReport } from '../repeating-log.js';

export class RedisHealth {
  private timer: NodeJS.Timeout | undefined;
  private lastAnswerAt = Date.now();
  /** Redis' clock minus ours, from the last probe (ms). */
  private offsetMs: number | undefined;
  private wasHealthy = true;

  constructor(
    private readonly redis: Redis,
    private readonly timeoutMs: number,
    private readonly report: ConditionReport,
  ) {}

  async start(): Promise<void> {
    await this.probe();
    this.timer = setInterval(() => void this.probe(), Math.max(50, Math.floor(this.timeoutMs / 4)));
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** False once Redis has not answered for REDIS_TIMEOUT_MS, or the connection is down. */
  healthy(): boolean {
    const healthy = this.redis.status === 'ready' && Date.now() - this.lastAnswerAt < this.timeoutMs;
    if (healthy !== this.wasHealthy) {
      this.wasHealthy = healthy;
      if (healthy) this.report.ok('answers');
      else this.report.fail('answers', undefined, { silentMs: Date.now() - this.lastAnswerAt, timeoutMs: this.timeoutMs });
    }
    return healthy;
  }

  /**
   * The latest Redis time at which an admission sent now may still take effect, or undefined
   * before the first probe. Half the command timeout: an admission Redis runs in time leaves
   * its answer half a timeout to come back before the bridge gives up on it and answers
   * `unavailable`, and one that arrives later is refused by Redis, never queued behind that
   * answer.
   */
  admitCutoff(): number | undefined {
    return this.offsetMs === undefined ? undefined : Date.now() + this.offsetMs + Math.floor(this.timeoutMs / 2);
  }

  private async probe(): Promise<void> {
    const sentAt = Date.now();
    try {
      const [seconds, micros] = await this.redis.time();
      const answeredAt = Date.now();
      this.lastAnswerAt = answeredAt;
      this.offsetMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - Math.round((sentAt + answeredAt) / 2);
    } catch {
      // Silence is the signal: healthy() compares lastAnswerAt with the timeout.
    }
    this.healthy();
  }
}
