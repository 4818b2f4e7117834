// A store that does not outlive the process (memory): what is still queued at shutdown is
// answered `unavailable` rather than lost silently.
import { BridgeError } from '../../contract/index.js';
import type { Logger } from '../logger.js';
import { errorReply } from '../results/replies.js';
import type { Results } from '../results/results.js';
import type { Store } from '../store/port.js';

export async function answerQueuedOnShutdown(store: Pick<Store, 'durable' | 'queue'>, results: Results, logger: Logger): Promise<void> {
  if (store.durable) return;
  const unfinished = await store.queue.drain();
  const error = new BridgeError('unavailable', 'bridge is shutting down');
  for (const job of unfinished) await results.send(job, errorReply(job.id, error, job.priority));
  if (unfinished.length > 0) logger.warn({ count: unfinished.length }, 'queued requests answered unavailable');
}
