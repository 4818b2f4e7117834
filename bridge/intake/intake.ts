// Intake: one PUBLISH on devices/{id}/infer/{priority} becomes a queued job or an error
// reply. It runs inside the broker's authorizePublish, so the device's PUBACK is sent only
// after admission returned: "acknowledged" means "admitted" (docs/CONTRACT.md).
import { budgetCharges, budgetRefusal, type BudgetSettings } from './budgets.js';
import { DeviceRefusals } from './refusals.js';
import { fairCharge } from '../config/fair-share.js';
import type { Config } from '../config/config.js';
import { cacheKeyOf, type CachePolicy } from './cache-key.js';
import {
  BridgeError,
  type DeviceRequest,
  type InboundRequest,
  InferRequestSchema,
  isCborRequest,
  isTemplateRequest,
  MAX_ECHOED_USER_PROPERTIES,
  MAX_ECHOED_USER_PROPERTY_BYTES,
  type OkReply,
  plainChatRequest,
  type Priority,
  type Reply,
  type ReplyRoute,
  type RequestProperties,
  responseTopicProblem,
  toBridgeError,
  unknownPriority,
} from '../../contract/index.js';
import { errorReply } from '../results/replies.js';
import type { Logger } from '../logger.js';
import type { LoadShedder } from './overload.js';
import type { Results, ReplyTarget } from '../results/results.js';
import { okReply } from '../results/replies.js';
import type { Dispatch } from '../scheduling/dispatch.js';
import type { Templates } from './templates.js';
import { imageRequestId, readImage } from './image.js';
import { estimateOf, promptTokensOf, type EstimateConfig } from './estimate.js';
import { decodePayload } from './payload.js';
import { readId, sniffCborId, sniffedId, sniffId } from './request-id.js';
import { jobKey, type Job, type JobImage } from '../model/job.js';
import type { AdmitResult, Store } from '../store/port.js';

export type IntakeConfig = Pick<
  Config,
  'maxPayloadBytes' | 'imageMaxBytes' | 'deviceRateLimitRpm' | 'queueMax' | 'queueMaxBytes' | 'priorityOffsetsMs' | 'idempotencyTtlS' | 'upstreamTimeoutMs'
> &
  EstimateConfig;

export type IntakeOutcome =
  | { outcome: 'queued' | 'cached' | 'duplicate' }
  /** Answered with an error reply; `error` is also the MQTT 5 PUBACK's reason. */
  | { outcome: 'rejected'; error: BridgeError };

export interface IntakeDeps {
  config: IntakeConfig;
  store: Pick<Store, 'queue' | 'limits' | 'answers'>;
  results: Results;
  logger: Logger;
  cache: CachePolicy;
  /** Asked after validation, before the store: past capacity a request is answered at once. */
  shedder: LoadShedder;
  /** Where routing sends a priority class, so differently routed requests never share answers. */
  routeOf: (priority: Priority) => string;
  /** The scheduler's part in admission (Scheduler implements it). */
  dispatch: Dispatch;
  /** CONFIG_FILE `templates`, which template requests are rendered with. */
  templates: Templates;
  /** A device's fair-share weight (CONFIG_FILE `weights`; 1 by default). */
  weightOf: (deviceId: string) => number;
  /** CONFIG_FILE `budgets` and what prices them; none: nothing is reserved. */
  budgets?: BudgetSettings | undefined;
  /** A request was refused by this budget (metrics). */
  onBudgetRefused?: (budget: string) => void;
  /** A rate_limited refusal dropped without a reply (metrics). */
  onReplyDropped?: () => void;
  clock?: () => number;
}

/** An image's share of the token estimate: OpenAI counts a high-detail 1024 px image as 765 tokens. */
const IMAGE_ESTIMATE_BYTES = 765 * 4;
/** Refusals of what a publish holds, known before admission: counted against the device's quota on their own. */
const CHARGED_REFUSALS = new Set<string>(['invalid_request', 'payload_too_large']);
/** When a device told queue_full may try again: the queue frees room as calls end, in about this long. */
const QUEUE_FULL_RETRY_MS = 1000;
/** The route of a CBOR request whose own route was refused: its error reply is CBOR still. */
const CBOR_ONLY: ReplyRoute = Object.freeze({ format: 'cbor' });

export class Intake {
  private accepting = true;
  private readonly config: IntakeConfig;
  private readonly store: Pick<Store, 'queue' | 'limits' | 'answers'>;
  private readonly results: Results;
  private readonly logger: Logger;
  private readonly clock: () => number;
  /** Read once: per-request debug lines cost nothing, not even their fields, when off. */
  private readonly debugLines: boolean;
  /** Devices over their quota: their replies and log lines are bounded, their publishes refused unread. */
  private readonly refusals: DeviceRefusals;

  constructor(private readonly deps: IntakeDeps) {
    ({ config: this.config, store: this.store, results: this.results, logger: this.logger } = deps);
    this.clock = deps.clock ?? Date.now;
    this.debugLines = deps.logger.isLevelEnabled('debug');
    this.refusals = new DeviceRefusals(this.logger, deps.onReplyDropped);
  }

  /** Shutdown: later requests are answered `unavailable`. */
  stop(): void {
    this.accepting = false;
  }

  async handle({ topic, payload, properties, redelivered }: InboundRequest): Promise<IntakeOutcome> {
    const arrivalMs = this.clock();
    const { deviceId } = topic;
    const priority = 'priority' in topic ? topic.priority : undefined;
    const target: ReplyTarget = { deviceId, deadlineMs: expiryDeadline(properties, arrivalMs) };
    const seen: { id: string | null } = { id: null };
    // Whether the device's quota has counted this publish (admission counts it, and a refusal
    // known before it is counted on its own).
    let counted = false;
    const cbor = isCborRequest(properties);
    try {
      // Read first, so that even a refused request is answered on its response topic (and in
      // its format); a bad route is refused once the id is known.
      const route = replyRouteOf(deviceId, properties, cbor);
      target.route = !(route instanceof BridgeError) ? route : cbor ? CBOR_ONLY : undefined;
      const over = this.refusals.retryAfter(deviceId, arrivalMs);
      if (over !== undefined) {
        counted = true; // over the quota: a refused publish is not counted
        throw this.rateLimited(deviceId, over);
      }
      const { parsed, image, at } = this.read({ topic, payload, properties }, cbor, route, seen);
      const template = isTemplateRequest(parsed) ? parsed.template : undefined;
      const request = isTemplateRequest(parsed) ? this.deps.templates.render(parsed, at, image) : parsed;
      // A template's prompt is on the bridge, and CBOR is shorter than the JSON the upstream
      // gets: the token estimate counts the request as JSON, and an image as what it costs.
      const bytes = template === undefined && !cbor ? payload.length : Buffer.byteLength(JSON.stringify(request)) + (image ? IMAGE_ESTIMATE_BYTES : 0);
      if (!this.accepting) throw new BridgeError('unavailable', 'bridge is shutting down');
      const { shedder } = this.deps;
      const shed = shedder.check(at);
      if (shed) {
        // Cheap on purpose (no store call, no log line: the shedder logs a summary), and not
        // recorded for idempotency, so a retry with the same id is admitted normally later.
        this.reply(target, errorReply(seen.id, shed, priority));
        return { outcome: 'rejected', error: shed };
      }
      shedder.admissionStarted();
      counted = true;
      try {
        return { outcome: await this.admit(target, at, { request, template, image }, arrivalMs, bytes, redelivered === true) };
      } finally {
        shedder.admissionEnded();
      }
    } catch (err) {
      const thrown = toBridgeError(err);
      // undefined: the store could not count it, so its replies are bounded here alone.
      const charged = counted || !CHARGED_REFUSALS.has(thrown.code) ? thrown : await this.chargeRefusal(deviceId, thrown, arrivalMs);
      const error = charged ?? thrown;
      if (error.code === 'rate_limited' || !charged) {
        // Answered at most once a second, logged per device and interval (refusals.ts).
        if (!this.refusals.refused(deviceId, this.clock(), charged !== undefined)) return { outcome: 'rejected', error };
        seen.id ??= sniffedId({ topic, payload, properties }, cbor);
      } else {
        const log = this.logger.child({ deviceId, reqId: seen.id });
        if (error.code === 'internal') log.error({ err }, 'intake failed');
        else log.info({ code: error.code }, `request rejected: ${error.message}`);
      }
      this.reply(target, errorReply(seen.id, error, priority));
      return { outcome: 'rejected', error };
    }
  }

  /**
   * A publish refused before admission counts against its device's quota as any other: over
   * it, the refusal is `rate_limited`. Without the store: undefined, the refusal stands.
   */
  private async chargeRefusal(deviceId: string, error: BridgeError, now: number): Promise<BridgeError | undefined> {
    const quota = await this.store.limits.chargeQuota(deviceId, this.config.deviceRateLimitRpm, now).catch(() => undefined);
    if (!quota) return undefined;
    return quota.ok ? error : this.rateLimited(deviceId, quota.retryAfterMs, now);
  }

  /** `rate_limited`; with `now`, the store's answer, which this instance remembers. */
  private rateLimited(deviceId: string, retryAfterMs: number, now?: number): BridgeError {
    if (now !== undefined) this.refusals.over(deviceId, retryAfterMs, now);
    return new BridgeError('rate_limited', `device ${deviceId} is over ${this.config.deviceRateLimitRpm} requests/min`, retryAfterMs);
  }

  /**
   * The request a publish carries (a raw image: the template request it asks, and the image)
   * and its priority class (`at`), or the error that refuses it; `seen.id` is set as soon as the request's id is known, so
   * even a refusal names it.
   */
  private read(
    { topic, payload, properties }: InboundRequest,
    cbor: boolean,
    route: ReplyRoute | BridgeError | undefined,
    seen: { id: string | null },
  ): { parsed: DeviceRequest; image?: JobImage; at: Priority } {
    if (topic.kind === 'bad_image_topic') {
      seen.id = imageRequestId(topic, properties);
      throw new BridgeError('invalid_request', topic.problem);
    }
    if (topic.kind === 'image') {
      seen.id = imageRequestId(topic, properties);
      if (route instanceof BridgeError) throw route;
      return { ...readImage(topic, payload, properties, this.config.imageMaxBytes), at: topic.priority };
    }
    if (payload.length > this.config.maxPayloadBytes) {
      seen.id = cbor ? sniffCborId(payload) : sniffId(payload);
      throw new BridgeError('payload_too_large', `payload is ${payload.length} bytes, over MAX_PAYLOAD_BYTES (${this.config.maxPayloadBytes})`);
    }
    const body = decodePayload(payload, cbor, seen);
    seen.id = readId(body);
    if (route instanceof BridgeError) throw route;
    if (topic.kind === 'bad_priority') {
      throw new BridgeError('invalid_request', unknownPriority(topic.segment));
    }
    return { parsed: plainChatRequest(body) ?? validRequest(body), at: topic.priority };
  }

  /**
   * Sends a reply without waiting for it to be delivered: admission runs before the request's
   * PUBACK, and with the plant's broker the reply's own acknowledgement arrives behind that
   * PUBACK on the same connection.
   */
  private reply(target: ReplyTarget, reply: Reply): void {
    this.results.send(target, reply).catch((err: unknown) => {
      this.logger.warn({ err, deviceId: target.deviceId, reqId: reply.id }, 'could not publish the reply');
    });
  }

  /**
   * The queued form of a valid request: its key, score, deadline and the estimates its claim is
   * charged; invalid_request when its model or its estimate is out of bounds (estimate.ts).
   */
  private jobOf(target: ReplyTarget, priority: Priority, request: Job['request'], arrivalMs: number, payloadBytes: number): Job {
    const { deviceId } = target;
    const ttlDeadline = request.ttl_ms === undefined ? undefined : arrivalMs + request.ttl_ms;
    const { prompt: promptEstimate, completion: completionEstimate } = estimateOf(request, payloadBytes, this.config, this.deps.budgets?.budgets);
    const weight = this.deps.weightOf(deviceId);
    return {
      key: jobKey(deviceId, request.id),
      deviceId,
      id: request.id,
      priority,
      request,
      arrivalMs,
      score: arrivalMs + this.config.priorityOffsetsMs[priority],
      deadlineMs: earliest(ttlDeadline, target.deadlineMs),
      route: target.route,
      tokenEstimate: promptEstimate + completionEstimate,
      attempts: 0,
      // Tokens in are charged when the call starts, tokens out once they are known (VTC's way):
      // a max_tokens-sized guess at the output would make a device that waits look served.
      fairCost: fairCharge(promptEstimate, 0, weight),
      fairWeight: weight,
      cacheKey: cacheKeyOf(request, this.deps.cache, this.deps.routeOf(priority)),
    };
  }

  private async admit(
    target: ReplyTarget,
    priority: Priority,
    { request, template, image }: Pick<Job, 'request' | 'template' | 'image'>,
    arrivalMs: number,
    payloadBytes: number,
    redelivered: boolean,
  ): Promise<'queued' | 'cached' | 'duplicate'> {
    const job = this.jobOf(target, priority, request, arrivalMs, payloadBytes);
    const { deviceId } = target;
    if (template !== undefined) job.template = template;
    if (image !== undefined) job.image = image;
    // Reserved by admission itself, after the quota, the idempotency record and the queue's room.
    const { budgets } = this.deps;
    const charges = budgets ? budgetCharges(budgets, job, promptTokensOf(payloadBytes), arrivalMs) : [];
    if (charges.length > 0) job.budget = charges;
    const { config } = this;
    const limits = {
      deviceRpm: config.deviceRateLimitRpm,
      queueMax: config.queueMax,
      queueMaxBytes: config.queueMaxBytes,
      imageTtlMs: config.idempotencyTtlS * 1000,
    };
    const { dispatch } = this.deps;
    const claim = dispatch.claimAlong();
    let result: AdmitResult | undefined;
    try {
      result = await this.store.queue.admit(job, limits, arrivalMs, claim);
    } finally {
      if (claim) dispatch.adopt(claim, result?.kind === 'queued' ? result.along : undefined, job.key);
    }
    let answer: OkReply | undefined;
    if (result.kind === 'cached') {
      answer = okReply(job, result.answer, { cached: true, attempts: 0, claimedAt: arrivalMs, upstreamMs: 0, now: this.clock() });
      result = await this.store.answers.admitAnswered(job, answer, this.config.idempotencyTtlS, arrivalMs);
    }
    // Fields rather than a child logger: a child per request costs more than the debug line it serves.
    const fields = { deviceId, reqId: request.id };
    const log = this.logger;
    switch (result.kind) {
      case 'queued':
        this.deps.shedder.admitted(priority);
        if (job.deadlineMs !== undefined) dispatch.watchDeadline(job.key, job.deadlineMs);
        if (this.debugLines) log.debug({ ...fields, priority }, 'request queued');
        if (!claim) dispatch.wake();
        return 'queued';
      case 'answered':
        if (this.debugLines) log.debug({ ...fields, priority }, 'request answered from the cache');
        if (answer) this.reply(job, answer);
        return 'cached';
      case 'duplicate_pending':
        log.info(fields, 'duplicate of a request still queued or in flight: its one reply answers both');
        return 'duplicate';
      case 'duplicate_done':
        if (redelivered) {
          // The broker's second delivery of one publish whose first was answered (a bridge
          // died, or its session was adopted, before the PUBACK): that answer already went out.
          log.info(fields, 'redelivery of an answered request: not answered again');
          return 'duplicate';
        }
        log.info(fields, 'duplicate of an answered request: stored reply published again');
        this.reply(job, result.reply);
        return 'duplicate';
      case 'rate_limited':
        throw this.rateLimited(deviceId, result.retryAfterMs, arrivalMs);
      case 'queue_full':
        throw new BridgeError('queue_full', `the queue is full (QUEUE_MAX ${config.queueMax}, QUEUE_MAX_BYTES ${config.queueMaxBytes})`, QUEUE_FULL_RETRY_MS);
      case 'budget_exceeded':
        this.deps.onBudgetRefused?.(result.charge.budget);
        throw budgetRefusal(result.charge, result.inFlight, Math.min(result.charge.resetAtMs - arrivalMs, config.upstreamTimeoutMs), arrivalMs);
      case 'cached':
        // admitAnswered never answers `cached`.
        throw new BridgeError('internal', 'admission answered cached twice');
    }
  }
}

/** The MQTT 5 Message Expiry Interval as a deadline, if the request has one. */
function expiryDeadline(properties: RequestProperties, arrivalMs: number): number | undefined {
  const seconds = properties.messageExpiryInterval;
  return seconds === undefined ? undefined : arrivalMs + seconds * 1000;
}

function earliest(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.min(a, b);
}

/**
 * What the request's MQTT 5 properties ask of its reply; undefined when they ask nothing.
 * A response topic outside the device's namespace, too many user properties to echo, or a
 * property given more than once (a protocol error), are the error that refuses the request.
 */
function replyRouteOf(deviceId: string, properties: RequestProperties, cbor: boolean): ReplyRoute | BridgeError | undefined {
  const { responseTopic, correlationData, userProperties, repeated } = properties;
  if (repeated) return new BridgeError('invalid_request', `MQTT 5 properties given more than once: ${repeated.join(', ')}`);
  if (responseTopic === undefined && userProperties === undefined) return cbor ? CBOR_ONLY : undefined;
  if (responseTopic !== undefined) {
    const problem = responseTopicProblem(deviceId, responseTopic);
    if (problem) return new BridgeError('invalid_request', `Response Topic: ${problem}`);
  }
  if (userProperties !== undefined) {
    const pairs = Object.entries(userProperties).flatMap(([name, value]) => (Array.isArray(value) ? value : [value]).map((v) => [name, v]));
    const bytes = pairs.reduce((sum, [name, value]) => sum + Buffer.byteLength(name ?? '') + Buffer.byteLength(value ?? ''), 0);
    if (pairs.length > MAX_ECHOED_USER_PROPERTIES || bytes > MAX_ECHOED_USER_PROPERTY_BYTES) {
      return new BridgeError(
        'invalid_request',
        `User Property: at most ${MAX_ECHOED_USER_PROPERTIES} pairs of ${MAX_ECHOED_USER_PROPERTY_BYTES} bytes in all (got ${pairs.length}, ${bytes} bytes)`,
      );
    }
  }
  const route: ReplyRoute = {
    responseTopic,
    correlationData: responseTopic === undefined ? undefined : correlationData?.toString('base64'),
    userProperties,
  };
  if (cbor) route.format = 'cbor';
  return route;
}

/** The request as the schema reads it, or the error that refuses it. */
function validRequest(body: unknown): DeviceRequest {
  const parsed = InferRequestSchema.safeParse(body);
  if (!parsed.success) throw new BridgeError('invalid_request', describeIssue(parsed.error.issues[0]));
  return parsed.data;
}

function describeIssue(issue: { path: PropertyKey[]; message: string } | undefined): string {
  if (!issue) return 'request does not match the schema';
  const path = issue.path.map(String).join('.');
  return path ? `${path}: ${issue.message}` : issue.message;
}
