// Probes of the running bridge, once a second: /healthz and /readyz (each must answer 200
// within PROBE_TIMEOUT_MS), and, every few seconds, the deployment's keys and memory in Redis.
import type { Redis } from 'ioredis';
import { sampleRedis, type RedisSample } from './redis-sample.js';

export const PROBE_TIMEOUT_MS = 3000;
const REDIS_EVERY_MS = 3000;

export interface ProbeFailure {
  atMs: number;
  path: '/healthz' | '/readyz';
  /** The status, or the error (a timeout, a refused connection). */
  got: string;
}

export interface ProbeLog {
  probes: number;
  failures: ProbeFailure[];
  /** Longest time between two 200s of /healthz, in ms. */
  longestHealthGapMs: number;
  /** The bridge's event-loop delay p99 (its /metrics), the largest seen, in ms. */
  maxLoopDelayP99Ms: number;
  redis: RedisSample[];
}

async function probe(base: string, path: ProbeFailure['path']): Promise<string> {
  try {
    const res = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.arrayBuffer();
    return String(res.status);
  } catch (err) {
    return err instanceof Error ? err.name : String(err);
  }
}

async function loopDelayP99Ms(base: string): Promise<number> {
  try {
    const text = await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) }).then((r) => r.text());
    return Number(/^nodejs_eventloop_lag_p99_seconds ([0-9.e+-]+)/m.exec(text)?.[1] ?? NaN) * 1000;
  } catch {
    return NaN;
  }
}

export class Probes {
  readonly log: ProbeLog = { probes: 0, failures: [], longestHealthGapMs: 0, maxLoopDelayP99Ms: 0, redis: [] };
  private lastHealthyAt = Date.now();
  private timers: NodeJS.Timeout[] = [];
  private running = new Set<Promise<unknown>>();

  constructor(
    private readonly httpPort: number,
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  start(): void {
    this.timers.push(setInterval(() => this.track(this.health()), 1000));
    this.timers.push(setInterval(() => this.track(this.sampleRedis()), REDIS_EVERY_MS));
  }

  /** A full sample (with every collection's entries) now, kept in the log too. */
  async fullSample(): Promise<RedisSample> {
    const sample = await sampleRedis(this.redis, this.prefix, true);
    this.log.redis.push(sample);
    return sample;
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    await Promise.allSettled([...this.running]);
    this.gap(Date.now());
  }

  private track(work: Promise<unknown>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  private gap(now: number): void {
    this.log.longestHealthGapMs = Math.max(this.log.longestHealthGapMs, now - this.lastHealthyAt);
  }

  private async health(): Promise<void> {
    const base = `http://127.0.0.1:${this.httpPort}`;
    const atMs = Date.now();
    const [healthz, readyz, delay] = await Promise.all([probe(base, '/healthz'), probe(base, '/readyz'), loopDelayP99Ms(base)]);
    this.log.probes += 1;
    if (healthz === '200') {
      this.gap(Date.now());
      this.lastHealthyAt = Date.now();
    } else this.log.failures.push({ atMs, path: '/healthz', got: healthz });
    if (readyz !== '200') this.log.failures.push({ atMs, path: '/readyz', got: readyz });
    if (Number.isFinite(delay)) this.log.maxLoopDelayP99Ms = Math.max(this.log.maxLoopDelayP99Ms, delay);
  }

  private async sampleRedis(): Promise<void> {
    try {
      this.log.redis.push(await sampleRedis(this.redis, this.prefix));
    } catch {
      // A slow Redis shows in the gaps between samples; the oracles read the full samples.
    }
  }
}
