// What the scheduler is given: its config, the store's roles it uses, the upstream it calls,
// where replies go, and who learns from it (metrics, the queue-wait overload guard).
import type { Config } from '../config/config.js';
import type { Price } from '../config/config-file.js';
import type { Logger } from '../logger.js';
import type { Job } from '../model/job.js';
import type { ConditionReport } from '../repeating-log.js';
import type { Results } from '../results/results.js';
import type { Store } from '../store/port.js';
import type { UpstreamCall, UpstreamResult } from '../upstream/client.js';

export interface SchedulerDeps {
  config: SchedulerConfig;
  store: Pick<Store, 'queue' | 'limits' | 'answers'>;
  upstream: Upstream;
  results: Results;
  logger: Logger;
  /** This instance's lease owner name. */
  owner: string;
  /** Default Date.now. */
  clock?: () => number;
  /** Default: nobody (NO_OBSERVER). */
  observer?: SchedulerObserver;
  /** Default: nobody (NO_QUEUE_WAIT). */
  queueWait?: QueueWaitSink;
  /** The store out of reach: claims, reaps, renewals and sweeps failing for it are summed up there. Default: its own. */
  outage?: ConditionReport;
}

export type SchedulerConfig = Pick<
  Config,
  'maxConcurrency' | 'upstreamTimeoutMs' | 'rateLimitRpm' | 'rateLimitTpm' | 'maxAttempts' | 'idempotencyTtlS' | 'upstreamModel' | 'cacheTtlS'
> &
  /** OUTPUT_RETRIES (default 1). */
  Partial<Pick<Config, 'outputRetries'>> & {
    /** Model → price per million tokens (CONFIG_FILE `prices`), for the usage's cost. */
    prices: Record<string, Price>;
    /** CONFIG_FILE `embeddingModel`: the model of embeddings requests that name none (never UPSTREAM_MODEL). */
    embeddingModel: string;
  };

/** What the scheduler reports for metrics (bridge/ops/metrics/bridge-metrics.ts); every method must be cheap. */
export interface SchedulerObserver {
  /** A job was claimed (holding its lock, if it names one) at `claimedAt`. */
  claimed(priority: Job['priority'], arrivalMs: number, locked: boolean, claimedAt: number): void;
  /** An upstream call answered. */
  answered(result: UpstreamResult): void;
  /** A job was answered by an identical one in flight. */
  coalescedAnswer(): void;
  /** A retry had to wait for rate budget. */
  rateLimitWait(): void;
  /** Usage as recorded in the store. */
  usage(model: string, promptTokens: number, completionTokens: number, costUsd: number, template?: string): void;
}

/** What the queue-wait overload guard learns from the claims (bridge/intake/overload.ts). */
export interface QueueWaitSink {
  claimed(priority: Job['priority'], waitMs: number, locked: boolean): void;
  /** A claim or a retry was held back by the upstream rate budget or a 429 pause. */
  claimHeld(): void;
  /** A claim took less than it asked for: nothing was waiting. */
  queueDrained(): void;
}

export interface Upstream {
  call(call: UpstreamCall): Promise<UpstreamResult>;
}

export const NO_QUEUE_WAIT: QueueWaitSink = { claimed: () => undefined, claimHeld: () => undefined, queueDrained: () => undefined };

export const NO_OBSERVER: SchedulerObserver = {
  claimed: () => undefined,
  answered: () => undefined,
  coalescedAnswer: () => undefined,
  rateLimitWait: () => undefined,
  usage: () => undefined,
};
