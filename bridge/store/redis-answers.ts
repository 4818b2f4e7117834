// The Redis store's answers and cache: the reply each request got (its idempotency record),
// the response cache and coalescing flights identical requests share, and usage counts.
import type { Reply } from '../../contract/index.js';
import type { Job } from '../model/job.js';
import { cacheValue, freshOldRecordedReply, freshRecordedReply, readCached, toAdmitResult } from './redis-codec.js';
import type { RedisSteps } from './redis-steps.js';
import type { UsageBuffer } from './usage-buffer.js';
import type { AdmitResult, Answers, CachedAnswer, FlightClaim, Lead, UsageRecord } from './port.js';

export class RedisAnswers implements Answers {
  constructor(
    private readonly steps: RedisSteps,
    private readonly usageBuffer: UsageBuffer,
  ) {}

  async admitAnswered(job: Job, reply: Reply, ttlS: number, now: number): Promise<AdmitResult> {
    const k = this.steps.keys;
    const result = (await this.steps.run(
      'admit-answered',
      [k.idem(job.key)],
      [k.base, JSON.stringify(reply), now, ttlS * 1000, this.steps.admitCutoff()],
      this.steps.replicas?.connection,
    )) as [string, string?];
    if (result[0] === 'answered') await this.steps.replicated();
    return toAdmitResult(result, 'admit-answered');
  }

  async storedReply(key: string, now: number): Promise<Reply | undefined> {
    const { redis } = this.steps;
    const idem = this.steps.keys.idem(key);
    try {
      return freshRecordedReply(await redis.get(idem), now);
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith('WRONGTYPE'))) return this.steps.guard(Promise.reject(err));
      return freshOldRecordedReply(await this.steps.guard(redis.hmget(idem, 'state', 'exp', 'reply', 'x', 'y')), now);
    }
  }

  async cacheGet(cacheKey: string, now: number): Promise<CachedAnswer | undefined> {
    return readCached(await this.steps.guard(this.steps.redis.get(this.steps.keys.cache(cacheKey))), now);
  }

  async cacheSet(cacheKey: string, answer: CachedAnswer, ttlMs: number, now: number): Promise<void> {
    await this.steps.guard(this.steps.redis.set(this.steps.keys.cache(cacheKey), cacheValue(answer, ttlMs, now), 'PX', ttlMs));
  }

  async lead(flights: FlightClaim[], leaseMs: number, now: number): Promise<Lead[]> {
    if (flights.length === 0) return [];
    const k = this.steps.keys;
    const keys: string[] = [];
    for (const { cacheKey } of flights) keys.push(k.cache(cacheKey), k.flight(cacheKey));
    const flat = (await this.steps.run('lead', keys, [leaseMs, now, ...flights.map((f) => f.jobKey)])) as string[];
    const leads: Lead[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      leads.push(flat[i] === 'answer' ? { answer: JSON.parse(flat[i + 1] ?? 'null') as CachedAnswer } : { leader: flat[i + 1] ?? '' });
    }
    return leads;
  }

  async unlead(cacheKey: string, jobKey: string): Promise<void> {
    await this.steps.run('unlead', [this.steps.keys.flight(cacheKey)], [jobKey]);
  }

  async recordUsage(record: UsageRecord, now: number): Promise<void> {
    this.usageBuffer.add(record, now);
  }
}
