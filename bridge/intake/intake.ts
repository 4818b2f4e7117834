// Intake: one PUBLISH on devices/{id}/infer/{priority} becomes a queued job or an error
// reply. It runs inside the broker's authorizePublish, so the device's PUBACK is sent only
// after admission returned: "acknowledged" means "admitted" (docs/CONTRACT.md).
import { settlementOf } from '../store/budget-spend.js';
import { budgetCharges, type BudgetSettings } from './budgets.js';
import { fairCharge } from '../config/fair-share.js';
import type { Config } from '../config/config.js';
import { cacheKeyOf, type CachePolicy } from './cache-key.js';
import { decodeCbor, requireJsonShaped } from '../../contract/cbor.js';
import {
  BridgeError,
  type DeviceRequest,
  type InboundRequest,
  InferRequestSchema,
  isCborRequest,
  isEmbeddingRequest,
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
import { readId, sniffCborId, sniffId } from './request-id.js';
import { jobKey, type AdmitResult, type Job, type JobImage, type Store } from '../store/types.js';

export type IntakeConfig = Pick<
  Config,
  'maxPayloadBytes' | 'imageMaxBytes' | 'deviceRateLimitRpm' | 'queueMax' | 'priorityOffsetsMs' | 'idempotencyTtlS'
>;

export type IntakeOutcome =
  | { outcome: 'queued' | 'cached' | 'duplicate' }
  /** Answered with an error reply; `error` is also the MQTT 5 PUBACK's reason. */
  | { outcome: 'rejected'; error: BridgeError };

export interface IntakeDeps {
  config: IntakeConfig;
  store: Store;
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
  clock?: () => number;
}

/** The tokens in of a request, estimated from its size. */
const promptTokensOf = (payloadBytes: number): number => Math.ceil(payloadBytes / 4);

/** Tokens of a default completion when a request names no max_tokens, for the TPM estimate. */
const DEFAULT_COMPLETION_TOKENS = 256;
/** An image's share of the token estimate: OpenAI counts a high-detail 1024 px image as 765 tokens. */
const IMAGE_ESTIMATE_BYTES = 765 * 4;
/** The route of a CBOR request whose own route was refused: its error reply is CBOR still. */
const CBOR_ONLY: ReplyRoute = Object.freeze({ format: 'cbor' });

export class Intake {
  private accepting = true;
  private readonly config: IntakeConfig;
  private readonly store: Store;
  private readonly results: Results;
  private readonly logger: Logger;
  private readonly clock: () => number;
  /** Read once: per-request debug lines cost nothing, not even their fields, when off. */
  private readonly debugLines: boolean;

  constructor(private readonly deps: IntakeDeps) {
    ({ config: this.config, store: this.store, results: this.results, logger: this.logger } = deps);
    this.clock = deps.clock ?? Date.now;
    this.debugLines = deps.logger.isLevelEnabled('debug');
  }

  /** Shutdown: later requests are answered `unavailable`. */
  stop(): void {
    this.accepting = false;
  }

  async handle({ topic, payload, properties }: InboundRequest): Promise<IntakeOutcome> {
    const arrivalMs = this.clock();
    const { deviceId } = topic;
    const priority = 'priority' in topic ? topic.priority : undefined;
    const target: ReplyTarget = { deviceId, deadlineMs: expiryDeadline(properties, arrivalMs) };
    const seen: { id: string | null } = { id: null };
    try {
      const cbor = isCborRequest(properties);
      // Read first, so that even a refused request is answered on its response topic (and in
      // its format); a bad route is refused once the id is known.
      const route = replyRouteOf(deviceId, properties, cbor);
      target.route = !(route instanceof BridgeError) ? route : cbor ? CBOR_ONLY : undefined;
      const { parsed, image, at } = this.read({ topic, payload, properties }, cbor, route, seen);
      const template = isTemplateRequest(parsed) ? parsed.template : undefined;
      const request = isTemplateRequest(parsed) ? this.deps.templates.render(parsed, at, image) : parsed;
      // A template's prompt is on the bridge, and CBOR is shorter than the JSON the upstream
      // gets: the token estimate counts the request as JSON, and an image as what it costs.
      const bytes =
        template === undefined && !cbor ? payload.length : Buffer.byteLength(JSON.stringify(request)) + (image ? IMAGE_ESTIMATE_BYTES : 0);
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
      try {
        return { outcome: await this.admit(target, at, { request, template, image }, arrivalMs, bytes) };
      } finally {
        shedder.admissionEnded();
      }
    } catch (err) {
      const error = toBridgeError(err);
      const log = this.logger.child({ deviceId, reqId: seen.id });
      if (error.code === 'internal') log.error({ err }, 'intake failed');
      else log.info({ code: error.code }, `request rejected: ${error.message}`);
      this.reply(target, errorReply(seen.id, error, priority));
      return { outcome: 'rejected', error };
    }
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
    const body = cbor ? decodeCbor(payload) : parseJson(payload);
    seen.id = readId(body);
    if (cbor) requireJsonShaped(body);
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

  /** Reserves the job's estimate in its budgets (it carries them), or refuses it `budget_exceeded`. */
  private async reserveBudgets(job: Job, promptEstimate: number, now: number): Promise<void> {
    const { budgets } = this.deps;
    const charges = budgets ? budgetCharges(budgets, job, promptEstimate, now) : [];
    if (charges.length === 0) return;
    const refused = await this.store.reserveBudgets(charges, now);
    if (refused) {
      this.deps.onBudgetRefused?.(refused.budget);
      const whose = refused.subject === '*' ? '' : ` for ${refused.subject}`;
      const until = new Date(refused.resetAtMs).toISOString();
      throw new BridgeError('budget_exceeded', `budget "${refused.budget}"${whose} is used up until ${until}`, Math.max(0, refused.resetAtMs - now));
    }
    job.budget = charges;
  }

  /** A reservation whose job did not go into the queue (a duplicate, a cached answer, a refusal): nothing used. */
  private releaseBudgets(job: Job): void {
    if (!job.budget) return;
    this.store.settleBudgets(settlementOf(job.budget, undefined)).catch((err: unknown) => {
      this.logger.warn({ err, deviceId: job.deviceId, reqId: job.id }, 'could not release a budget reservation');
    });
  }

  /** The queued form of a valid request: its key, score, deadline and the estimates its claim is charged. */
  private jobOf(target: ReplyTarget, priority: Priority, request: Job['request'], arrivalMs: number, payloadBytes: number): Job {
    const { deviceId } = target;
    const ttlDeadline = request.ttl_ms === undefined ? undefined : arrivalMs + request.ttl_ms;
    const promptEstimate = promptTokensOf(payloadBytes);
    // An embeddings answer has no completion tokens.
    const completionEstimate = isEmbeddingRequest(request)
      ? 0
      : (request.max_completion_tokens ?? request.max_tokens ?? DEFAULT_COMPLETION_TOKENS) * (request.n ?? 1);
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
  ): Promise<'queued' | 'cached' | 'duplicate'> {
    const job = this.jobOf(target, priority, request, arrivalMs, payloadBytes);
    const { deviceId } = target;
    if (template !== undefined) job.template = template;
    if (image !== undefined) job.image = image;
    await this.reserveBudgets(job, promptTokensOf(payloadBytes), arrivalMs);
    const limits = { deviceRpm: this.config.deviceRateLimitRpm, queueMax: this.config.queueMax };
    const { dispatch } = this.deps;
    const claim = dispatch.claimAlong();
    let result: AdmitResult | undefined;
    try {
      result = await this.store.admit(job, limits, arrivalMs, claim);
    } finally {
      if (claim) dispatch.adopt(claim, result?.kind === 'queued' ? result.along : undefined, job.key);
      if (result?.kind !== 'queued') this.releaseBudgets(job);
    }
    let answer: OkReply | undefined;
    if (result.kind === 'cached') {
      answer = okReply(job, result.answer, { cached: true, attempts: 0, claimedAt: arrivalMs, upstreamMs: 0, now: this.clock() });
      result = await this.store.admitAnswered(job, answer, limits, this.config.idempotencyTtlS, arrivalMs);
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
        log.info(fields, 'duplicate of an answered request: stored reply published again');
        this.reply(job, result.reply);
        return 'duplicate';
      case 'rate_limited':
        throw new BridgeError(
          'rate_limited',
          `device ${deviceId} is over ${this.config.deviceRateLimitRpm} requests/min`,
          result.retryAfterMs,
        );
      case 'queue_full':
        throw new BridgeError('queue_full', `the queue is full (QUEUE_MAX ${this.config.queueMax})`);
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
 * A response topic outside the device's namespace, or too many user properties to echo,
 * are the error that refuses the request.
 */
function replyRouteOf(deviceId: string, properties: RequestProperties, cbor: boolean): ReplyRoute | BridgeError | undefined {
  const { responseTopic, correlationData, userProperties } = properties;
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

function parseJson(payload: Buffer): unknown {
  try {
    return JSON.parse(payload.toString('utf8'));
  } catch {
    throw new BridgeError('invalid_request', 'payload is not valid JSON');
  }
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
