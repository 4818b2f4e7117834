// The reaper: jobs whose holders stopped (their leases ran out) go back to the queue; those
// out of attempts come back from the store here and are answered `upstream_error`.
import { BridgeError } from '../../contract/index.js';
import { lazyChild, type Logger } from '../logger.js';
import type { Completion } from '../results/completion.js';
import { errorReply } from '../results/replies.js';
import type { Store } from '../store/port.js';
import { storeFailed } from '../store/outage.js';
import type { ConditionReport } from '../repeating-log.js';

/** How often this instance looks for jobs whose leases ran out (one cheap store call). */
const REAP_EVERY_MS = 500;

export interface ReaperDeps {
  store: Pick<Store, 'queue'>;
  completion: Completion;
  logger: Logger;
  /** The store out of reach: a reap failing for it is summed up there. */
  outage: ConditionReport;
  clock: () => number;
  maxAttempts: number;
  /** Ends completion retries at shutdown. */
  signal: AbortSignal;
  /** Some jobs were reaped out of attempts and answered. */
  onReaped: () => void;
}

export class Reaper {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: ReaperDeps) {}

  start(): void {
    this.timer = setInterval(() => void this.reap(), REAP_EVERY_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async reap(): Promise<void> {
    const { store, completion, logger, signal, outage } = this.deps;
    try {
      const exhausted = await store.queue.reap(this.deps.maxAttempts, this.deps.clock());
      for (const job of exhausted) {
        const log = lazyChild(logger, { reqId: job.id, deviceId: job.deviceId });
        // Never one with a recorded reply: the reap requeues those for a claim to publish it.
        const error = new BridgeError('upstream_error', `gave up after ${job.attempts} attempts whose holders stopped`);
        await completion.unheld(job, errorReply(job.id, error, job.priority), log, signal);
      }
      outage.ok('reap');
      if (exhausted.length > 0) this.deps.onReaped();
    } catch (err) {
      storeFailed(outage, 'reap', err, () => logger.warn({ err }, 'reap failed'));
    }
  }
}
