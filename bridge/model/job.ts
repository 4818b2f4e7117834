// A request as the bridge carries it from admission to its reply: plain data every stage and
// every store reads, so it survives a JSON round trip (Redis keeps it as JSON).
import type { InferRequest, Priority, Reply, ReplyRoute } from '../../contract/index.js';
import type { BudgetCharge } from './budget-charge.js';

/** A request as it waits in the queue. Plain data: it must survive a JSON round trip. */
export interface Job {
  /** `${deviceId}/${id}`: the idempotency key. */
  key: string;
  deviceId: string;
  id: string;
  priority: Priority;
  request: InferRequest;
  arrivalMs: number;
  /** arrival + the class's aging offset; the smallest score runs first. */
  score: number;
  /** The earlier of arrival + ttl_ms and the MQTT 5 Message Expiry: no upstream call may start at or after it. */
  deadlineMs: number | undefined;
  /** Where the reply goes besides the result topic, and what it echoes (MQTT 5 requests). */
  route?: ReplyRoute | undefined;
  /** Estimated upstream tokens (prompt estimate + max_tokens), for RATE_LIMIT_TPM. */
  tokenEstimate: number;
  /** Upstream attempts already spent by earlier holders whose lease expired. */
  attempts: number;
  /**
   * Fair share: what its claim charges its device's counter in its class (its estimated tokens
   * in, over the device's weight); the usage adds 2 × tokens out later. Absent counts 0.
   */
  fairCost?: number | undefined;
  /** The device's weight when it was admitted, so the charge is corrected on the same scale. */
  fairWeight?: number | undefined;
  /** The budgets its admission reserved an estimate in, settled when it completes. */
  budget?: BudgetCharge[] | undefined;
  /**
   * SHA-256 of the canonical request when it may be answered from the cache and share an
   * in-flight call with identical requests; undefined for `cache: false` and the like.
   */
  cacheKey?: string | undefined;
  /** The CONFIG_FILE template the request was rendered from, for usage by template. */
  template?: string | undefined;
  /** A raw camera image the request carries (its request holds only the image's hash). */
  image?: JobImage | undefined;
}

/** A raw camera image: its bytes as base64 only while the job lives (a dead letter keeps the rest). */
export interface JobImage {
  mime: string;
  sha256: string;
  bytes: number;
  base64?: string | undefined;
}

/** How a request names its image until the upstream body is built: by hash, so the cache key never holds the bytes. */
export const imageRef = (sha256: string): string => `edge-ai-bridge:image:sha256:${sha256}`;

/** The job as a dead letter keeps it: without an image's bytes. */
export function withoutImageBytes(job: Job): Job {
  if (job.image?.base64 === undefined) return job;
  const { base64: _bytes, ...kept } = job.image;
  return { ...job, image: kept };
}

/** A job an instance holds: leased to `owner`, and holding its lock (with fencing number) if it names one. */
export interface ClaimedJob extends Job {
  owner: string;
  fence: number | undefined;
  /** The upstream call this claim budgeted, to settle its tokens once the usage is known. */
  callId: string;
  /**
   * The reply an earlier holder recorded (recordReply) before its lease was lost: the job's
   * one reply, to publish as it is (no upstream call) and complete. Absent otherwise.
   */
  recordedReply?: Reply;
}

/** A job a claim took out of the queue because its deadline passed (ClaimResult.expired). */
export interface ExpiredJob extends Job {
  /** As ClaimedJob's: when set, the job is answered with it rather than `expired`. */
  recordedReply?: Reply;
}

export const jobKey = (deviceId: string, id: string): string => `${deviceId}/${id}`;

/** A dead letter's job as a new arrival, for replay. */
export function replayedJob(job: Job, offsetsMs: Record<Priority, number>, now: number): Job {
  // Its reservations were settled when it was dead-lettered: a replay reserves none.
  return { ...job, arrivalMs: now, score: now + offsetsMs[job.priority], deadlineMs: undefined, attempts: 0, budget: undefined };
}
