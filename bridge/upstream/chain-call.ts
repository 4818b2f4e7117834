// One call's walk along the provider chain: choose a provider, make one attempt there, decide
// from its outcome what comes next (chain.ts lists the rules), until the call is answered or fails.
import { BridgeError } from '../../contract/index.js';
import { lazyChild, type LazyLog, type Logger } from '../logger.js';
import { sleep, throwIfAborted } from './abortable.js';
import { attemptSpend } from './attempt-spend.js';
import { backoffDelayMs, type BackoffOptions } from './backoff.js';
import { withInlineImage, withOutputFormat } from './body.js';
import type { UpstreamCall, UpstreamResult } from './call.js';
import { chainReadyAt, peek, select, selectNow, type Chosen, type Member } from './candidates.js';
import { blameRefusal, setKeyAside, type RefusalContext } from './key-refusal.js';
import type { Outcome } from './outcome.js';
import type { Provider } from './provider.js';
import { resultOf, type AnswerShape } from './response.js';

/** The chain's settings every call of it follows. */
export interface ChainSettings {
  maxAttempts: number;
  maxRateLimitedRetries: number;
  backoff: BackoffOptions;
  maxRetryAfterMs: number;
  random: () => number;
  clock: () => number;
  logger: Logger;
  /** Read once: per-call debug lines are skipped without building their logger. */
  debugLines: boolean;
  /** How long a key shown to be refused stays out of rotation. */
  keySetAsideMs: number;
}

type Answered = Extract<Outcome, { kind: 'ok' }>;
type RateLimited = Extract<Outcome, { kind: 'rate_limited' }>;
type Failure = Exclude<Outcome, Answered | RateLimited>;
type KeyRefused = Extract<Outcome, { kind: 'key_refused' }>;

/** One call's progress: what it has spent so far and where it goes next. */
interface Progress {
  /** Attempts that count against maxAttempts, and how many of those timed out. */
  counted: number;
  timeouts: number;
  /** 429s so far, and HTTP requests made (429s included). */
  rateLimited: number;
  requests: number;
  /** The last counted failure, and the provider of the last retryable one. */
  last: Failure | undefined;
  lastFailed: Provider | undefined;
  /** The retry_after_ms of an `expired` or rate-limited failure. */
  lastRetryAfterMs: number | undefined;
  /** Slept before the next attempt, whose scan of the candidates starts at `position`. */
  waitMs: number;
  position: number;
}

export class ChainCall {
  private readonly progress: Progress = {
    counted: 0,
    timeouts: 0,
    rateLimited: 0,
    requests: 0,
    last: undefined,
    lastFailed: undefined,
    lastRetryAfterMs: undefined,
    waitMs: 0,
    position: 0,
  };
  private readonly log: LazyLog;
  private readonly maxAttempts: number;
  /** The body sent with the first model asked for; others (routes, fallbacks) are built once each in `payloads`. */
  private firstPayload: { payload: string; model: string; variant: string } | undefined;
  private payloads: Map<string, { payload: string; model: string }> | undefined;
  // `variant`: the model, and for a template's output how it is asked (payloadFor).

  constructor(
    private readonly settings: ChainSettings,
    private readonly req: UpstreamCall,
    private readonly shape: AnswerShape,
    private readonly candidates: Member[],
    private readonly modelFor: (provider: Provider) => string,
  ) {
    this.log = lazyChild(settings.logger, { reqId: req.requestId, deviceId: req.deviceId });
    this.maxAttempts = Math.max(1, Math.min(req.maxAttempts ?? settings.maxAttempts, settings.maxAttempts));
  }

  async run(): Promise<UpstreamResult> {
    for (;;) {
      const waiting = this.waitForTurn();
      if (waiting) await waiting;
      const choice = selectNow(this.candidates, this.progress.position, this.settings.clock) ?? this.choose();
      const chosen = choice instanceof Promise ? await choice : choice;
      if (chosen === undefined) continue;
      const outcome = await this.attempt(chosen);
      if (outcome.kind === 'ok') return this.answered(chosen, outcome);
      if (outcome.kind === 'rate_limited') this.afterRateLimit(chosen, outcome);
      else if (outcome.kind === 'key_refused') await this.afterKeyRefused(chosen, outcome);
      else this.afterFailure(chosen, outcome);
    }
  }

  /** Sleeps the wait due (never past the deadline), then checks the call may still start; no promise when nothing is due. */
  private waitForTurn(): Promise<void> | undefined {
    if (this.progress.waitMs > 0) return this.sleepTurn();
    throwIfAborted(this.req.signal);
    this.checkDeadline(Date.now());
    return undefined;
  }

  private async sleepTurn(): Promise<void> {
    const { progress, req } = this;
    // Never sleep past the deadline: fail now rather than wake up too late to start.
    this.checkDeadline(Date.now() + progress.waitMs);
    await sleep(progress.waitMs, req.signal);
    progress.waitMs = 0;
    throwIfAborted(req.signal);
    this.checkDeadline(Date.now());
  }

  /**
   * The provider and key for the next attempt (the scan when selectNow could not tell);
   * undefined when a cooled key must be waited for first.
   */
  private async choose(): Promise<Chosen | undefined> {
    const { progress, settings } = this;
    const selection = await select(this.candidates, progress.position, settings.clock);
    if (selection.kind === 'go') return selection;
    if (selection.kind === 'wait') {
      // Other calls cooled the keys meanwhile (their 429s reported the pause): wait for the first.
      progress.waitMs = Math.max(1, Math.min(selection.readyAt - settings.clock(), settings.maxRetryAfterMs));
      progress.lastRetryAfterMs = progress.waitMs;
      progress.position = 0;
      return undefined;
    }
    const retryAfterMs = selection.retryAt === undefined ? undefined : Math.max(0, selection.retryAt - settings.clock());
    const why = `no provider available (${selection.reasons.join('; ')})`;
    this.log().warn({ attempt: progress.counted, reasons: selection.reasons }, 'no upstream provider available');
    if (progress.counted > 0) throw this.exhausted(why, retryAfterMs);
    throw new BridgeError('upstream_error', why, retryAfterMs);
  }

  /** One attempt on the chosen provider, its outcome told to the provider's breaker. */
  private async attempt({ member, keyIndex, permit }: Chosen): Promise<Outcome> {
    const sink = this.req.stream;
    let wrote = false;
    const onText =
      sink &&
      ((text: string): void => {
        wrote = true;
        sink.delta(text);
      });
    let outcome: Outcome;
    try {
      const { payload, model } = this.payloadFor(member.provider);
      this.progress.requests += 1;
      const before = this.req.beforeAttempt?.(this.progress.requests);
      if (before) await before;
      outcome = await this.send(member.provider, keyIndex, payload, model, onText);
    } catch (err) {
      // The attempt never ran (or was aborted): hand a half-open probe back at once.
      await member.breaker?.release(permit);
      throw err;
    }
    this.req.afterAttempt?.(attemptSpend(outcome));
    // The device saw this attempt's text: it is void now, whatever comes next.
    if (wrote && outcome.kind !== 'ok') sink?.reset();
    // The breaker learns about the provider's health only; 4xx answers show it is up. What the
    // request caused, or may have (a 401/403), is no breaker event at all: a device's requests
    // can neither open a circuit nor keep a failing one closed.
    if (outcome.kind === 'invalid' || outcome.kind === 'key_refused') {
      await member.breaker?.release(permit);
      return outcome;
    }
    const recording = member.breaker?.record(permit, outcome.kind !== 'retry', outcome.kind === 'retry' ? outcome.message : undefined);
    if (recording) await recording;
    return outcome;
  }

  /** After beforeAttempt (counted in progress.requests): checks the call may still start, then sends. */
  private send(provider: Provider, keyIndex: number, payload: string, model: string, onText?: (text: string) => void): Promise<Outcome> {
    const { progress, req } = this;
    throwIfAborted(req.signal);
    // beforeAttempt may have waited (rate-limit tokens, lock lease), so look again.
    this.checkDeadline(Date.now());
    if (this.settings.debugLines) {
      this.log().debug(
        { attempt: progress.counted + 1, request: progress.requests, provider: provider.name, model, keyId: provider.keys.idOf(keyIndex) },
        'upstream attempt',
      );
    }
    return provider.attempt(payload, model, provider.headers(req.headers, keyIndex), req.signal, this.shape, onText);
  }

  private payloadFor(provider: Provider): { payload: string; model: string; variant?: string } {
    const model = this.modelFor(provider);
    // A template's output is asked in one of two ways, by provider: part of the body's identity.
    const variant = this.req.output === undefined ? model : `${model}\n${provider.structuredOutputs ? 'schema' : 'json'}`;
    if (this.firstPayload === undefined) return (this.firstPayload = { ...this.payloadWith(model, provider), variant });
    if (this.firstPayload.variant === variant) return this.firstPayload;
    this.payloads ??= new Map();
    let entry = this.payloads.get(variant);
    if (!entry) {
      entry = this.payloadWith(model, provider);
      this.payloads.set(variant, entry);
    }
    return entry;
  }

  /**
   * The body with `model` in its place (as it is, no copy, when it names that model already),
   * asking for a stream with the usage at its end when the call streams, and for a template's
   * output the way `provider` takes it.
   */
  private payloadWith(model: string, provider: Provider): { payload: string; model: string } {
    try {
      return this.serialized(model, provider);
    } catch (err) {
      // JSON.stringify refuses some values (a BigInt, a cycle): the request's fault, no attempt's.
      throw new BridgeError('invalid_request', `the request body cannot be serialized: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private serialized(model: string, provider: Provider): { payload: string; model: string } {
    const { stream, inline, output } = this.req;
    const body = output === undefined ? this.req.body : withOutputFormat(this.req.body, output, provider.structuredOutputs);
    if (stream && this.shape.kind === 'chat') {
      return { payload: withInlineImage(JSON.stringify({ ...body, model, stream: true, stream_options: { include_usage: true } }), inline), model };
    }
    return { payload: withInlineImage(JSON.stringify(body.model === model ? body : { ...body, model }), inline), model };
  }

  private answered({ member: { provider }, keyIndex }: Chosen, { completion, ms }: Answered): UpstreamResult {
    provider.keys.answered(keyIndex, this.modelFor(provider));
    const attempts = this.progress.counted + 1;
    if (this.settings.debugLines) {
      this.log().debug({ attempts, upstreamMs: Math.round(ms), provider: provider.name, model: completion.model }, 'upstream answered');
    }
    return resultOf(completion, attempts, ms, provider.name);
  }

  /** A 429: the key cools, and the call moves on at once unless the whole chain is cooling. */
  private afterRateLimit({ member: { provider }, keyIndex, position }: Chosen, outcome: RateLimited): void {
    const { progress, settings } = this;
    progress.rateLimited += 1;
    const asked = outcome.retryAfterMs;
    const coolMs = Math.min(asked ?? backoffDelayMs(progress.rateLimited, settings.backoff, settings.random), settings.maxRetryAfterMs);
    const now = settings.clock();
    provider.keys.cool(keyIndex, now + coolMs);
    progress.lastRetryAfterMs = coolMs;
    this.waitForChain(provider, keyIndex, coolMs, now);
    if (progress.rateLimited > settings.maxRateLimitedRetries) {
      throw new BridgeError(
        'upstream_error',
        `upstream still rate-limited after ${settings.maxRateLimitedRetries} retries: ${outcome.message}`,
        progress.lastRetryAfterMs,
      );
    }
    // This provider's other keys first; after a wait for the whole chain, the preferred order again.
    progress.position = progress.waitMs > 0 ? 0 : position;
    const fields = {
      status: 429,
      provider: provider.name,
      keyId: provider.keys.idOf(keyIndex),
      attempt: progress.counted,
      rateLimited: progress.rateLimited,
      coolMs,
      delayMs: progress.waitMs,
      retryAfter: asked !== undefined,
    };
    this.log().warn(
      fields,
      progress.waitMs > 0 ? 'upstream rate-limited; every key of the chain is cooling, waiting' : 'upstream rate-limited; key cooling, trying another',
    );
  }

  /**
   * Waits only when no other key or provider can take the call now; then the whole chain is
   * rate-limited and the fleet should pause (reported even when the call gives up).
   */
  private waitForChain(provider: Provider, keyIndex: number, coolMs: number, now: number): void {
    const { progress } = this;
    const othersReadyAt = chainReadyAt(this.candidates, now, { provider, keyIndex });
    if (othersReadyAt !== undefined && othersReadyAt <= now) {
      progress.waitMs = 0;
      return;
    }
    progress.waitMs = othersReadyAt === undefined ? coolMs : Math.min(othersReadyAt - now, coolMs);
    progress.lastRetryAfterMs = progress.waitMs;
    this.req.onRateLimited?.(progress.waitMs);
  }

  /** A counted failure: the call fails now, or the next attempt is set up. */
  private afterFailure(chosen: Chosen, outcome: Failure): void {
    const { progress } = this;
    const { provider } = chosen.member;
    progress.counted += 1;
    progress.last = outcome;
    if (outcome.kind === 'retry' && outcome.timeout) progress.timeouts += 1;

    if (outcome.kind === 'invalid') {
      this.log().warn(
        { status: outcome.status, attempt: progress.counted, provider: provider.name, reason: outcome.message },
        'upstream refused the request: caused by the request',
      );
      throw new BridgeError('invalid_request', outcome.message);
    }
    if (outcome.kind === 'fatal') {
      this.log().warn({ status: outcome.status, attempt: progress.counted, provider: provider.name }, 'upstream refused the request');
      throw new BridgeError('upstream_error', outcome.message);
    }
    if (outcome.kind === 'bad_key') setKeyAside(this.refusalContext(chosen), outcome.message);
    if (outcome.kind === 'bad_key' || outcome.kind === 'key_refused') this.nextKey(chosen);
    else this.moveOn(chosen);

    if (progress.counted >= this.maxAttempts) {
      this.log().warn({ status: outcome.status, attempt: progress.counted, provider: provider.name }, 'upstream attempts exhausted');
      throw this.exhausted('out of attempts');
    }
    this.log().warn(
      {
        status: outcome.status,
        attempt: progress.counted,
        provider: provider.name,
        delayMs: progress.waitMs,
        reason: outcome.message,
        keyId: provider.keys.idOf(chosen.keyIndex),
      },
      'upstream attempt failed; retrying',
    );
  }

  /**
   * A 401/403: when the probe clears the key, the request fails alone (invalid_request);
   * otherwise the call goes on with another key (blameRefusal set this one aside on evidence)
   * or, while the key is only in doubt, at the next provider (a single key would be picked again).
   */
  private async afterKeyRefused(chosen: Chosen, outcome: KeyRefused): Promise<void> {
    const blame = await blameRefusal({ ...this.refusalContext(chosen), model: this.modelFor(chosen.member.provider) }, outcome);
    if (blame.about === 'request') {
      this.progress.counted += 1;
      throw blame.error;
    }
    this.afterFailure(chosen, outcome);
    if (!blame.setAside) this.progress.position = (chosen.position + 1) % this.candidates.length;
  }

  private refusalContext({ member: { provider }, keyIndex }: Chosen): Omit<RefusalContext, 'model'> {
    return { provider, keyIndex, clock: this.settings.clock, setAsideMs: this.settings.keySetAsideMs, log: this.log };
  }

  /** A key in doubt or set aside: the call goes on at once with another. */
  private nextKey({ position }: Chosen): void {
    this.progress.position = position; // this provider's other keys first
    this.progress.waitMs = 0; // a different key is a fresh start, not a struggling upstream
  }

  /** A retryable failure: the next attempt starts at the next provider in the order. */
  private moveOn({ member, position }: Chosen): void {
    const { progress, settings } = this;
    progress.lastFailed = member.provider;
    progress.position = (position + 1) % this.candidates.length;
    // Back off only when the next attempt would go to the provider that just failed. When
    // none looks available (its circuit just opened), look now: failing fast beats a backoff.
    const next = peek(this.candidates, progress.position, settings.clock());
    progress.waitMs = next === member ? backoffDelayMs(progress.counted, settings.backoff, settings.random) : 0;
  }

  // The contract defines `expired` as "ttl_ms passed before an upstream call could start".
  // So it is only the answer while no counted attempt has run; 429s do not count, since the
  // upstream refused to start the work (and the contract says their wait counts against
  // ttl_ms). Once an attempt has run and failed, the deadline merely ends the retries and
  // the call fails with that failure's code (upstream_error / upstream_timeout), which tells
  // the device more than `expired` would.
  private checkDeadline(startAt: number): void {
    const { progress, req } = this;
    if (req.deadline === undefined || startAt < req.deadline) return;
    if (progress.counted > 0) throw this.exhausted('ttl_ms passed before the next attempt could start');
    const note = progress.rateLimited > 0 ? ` (upstream answered 429 ${progress.rateLimited} times)` : '';
    throw new BridgeError('expired', `ttl_ms passed before an upstream call could start${note}`, progress.lastRetryAfterMs);
  }

  /** The error of a call that ran out of attempts (or time, or providers) after counted ones. */
  private exhausted(why: string, retryAfterMs?: number): BridgeError {
    const { counted, timeouts, last, lastFailed } = this.progress;
    const plural = counted === 1 ? 'attempt' : 'attempts';
    if (counted > 0 && timeouts === counted) {
      const timeoutMs = lastFailed?.timeoutMs ?? 0;
      return new BridgeError('upstream_timeout', `${why}: no answer within ${timeoutMs} ms in ${counted} ${plural}`, retryAfterMs);
    }
    const lastMessage = last?.message ?? 'no attempt ran';
    return new BridgeError('upstream_error', `${why}: upstream failed after ${counted} ${plural}; last: ${lastMessage}`, retryAfterMs);
  }
}
