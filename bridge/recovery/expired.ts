// Jobs a claim took out of the queue because their deadline passed: nobody holds them, so
// they are answered here, `expired`, or with the reply recorded before they went back.
import { BridgeError } from '../../contract/index.js';
import { lazyChild, type Logger } from '../logger.js';
import type { Completion } from '../results/completion.js';
import { errorReply } from '../results/replies.js';
import type { ExpiredJob } from '../model/job.js';

/** Answers and completes one expired job; `signal` ends the completion's retries at shutdown. */
export async function answerExpired(job: ExpiredJob, completion: Completion, logger: Logger, signal: AbortSignal): Promise<void> {
  const log = lazyChild(logger, { reqId: job.id, deviceId: job.deviceId });
  if (job.recordedReply !== undefined) {
    // Its reply was recorded (and maybe published) before it went back to the queue: that
    // reply, not `expired`, is its answer.
    log().info('deadline passed in the queue after the reply was recorded: answering with it');
    await completion.unheld(job, job.recordedReply, log, signal);
    return;
  }
  log().info('request expired in the queue');
  const reply = errorReply(job.id, new BridgeError('expired', 'ttl_ms passed before an upstream call could start'), job.priority);
  await completion.unheld(job, reply, log, signal);
}
