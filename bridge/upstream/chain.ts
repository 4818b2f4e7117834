// The provider chain: the one place the bridge decides where an upstream call goes, for chat
// and embeddings calls alike (the body decides the endpoint and how the answer is read). Per
// attempt it picks a provider (route first, then the chain order; open circuits and providers
// without a usable key are skipped), makes ONE HTTP attempt there (Provider.attempt), records
// the outcome in that provider's breaker and key ring, and decides what comes next:
//
// - ok: done; the reply names the model that answered and the provider.
// - retryable failure (network, timeout, 5xx, unusable 200): counts against MAX_ATTEMPTS and
//   the breaker; the next attempt starts at the NEXT provider in the order, so a request
//   whose primary is down is answered by the fallback within the same request. Backoff is
//   slept only when the next attempt goes back to the provider that just failed.
// - 401/403 (or a 429 for an exhausted quota): counts an attempt; that key leaves rotation
//   for the life of the process (logged by its short hash, never the key); another key or
//   provider is tried at once.
// - 429: not counted (up to MAX_RATE_LIMITED_RETRIES per request); that key cools for its
//   Retry-After; the call moves on at once to another healthy key or provider. Only when the
//   whole chain is rate-limited (no provider that could take the call has a key ready) does it
//   wait, and only then does it call onRateLimited, which pauses dispatch fleet-wide.
// - any other 4xx: the request itself is refused; it fails at once, on no other provider.
//
// MAX_ATTEMPTS counts attempts across the whole chain. When every provider is unavailable
// (circuits open, the half-open probe taken by another call, or every key refused) the call
// fails at once with upstream_error "no provider available (…)" and a retry_after_ms of the
// earliest half-open time: it does not wait out a cool-down (a request's ttl_ms is usually
// shorter, and its device is better told now).
import type { Route } from '../config/config-file.js';
import { BridgeError, type Priority, type RequestKind } from '../../contract/index.js';
import { lazyChild, type Logger } from '../logger.js';
import { backoffDelayMs, type BackoffOptions } from './backoff.js';
import { Breaker, type BreakerConfig, type BreakerStore, type CircuitState, type Permit } from './breaker.js';
import { isEmbeddingsBody } from './body.js';
import type { UpstreamCall, UpstreamResult } from './call.js';
import type { KeyRingHealth } from './keys.js';
import { Provider, shuttingDown, type Outcome, type ProviderOptions } from './provider.js';
import { CHAT_SHAPE, type AnswerShape } from './response.js';

/** Where config sends a call: a provider (tried first) and/or a model. */
export type { Route };

export interface ChainBreakerOptions {
  store: BreakerStore;
  consecutiveFailures: number;
  errorRate: number;
  windowMs: number;
  minCalls: number;
  /** BREAKER_COOLDOWN_MS. */
  cooldownMs: number;
}

export interface ProviderChainOptions {
  /** In the order they are tried (at least one). */
  providers: ProviderOptions[];
  /** Requested model → provider and/or model (CONFIG_FILE `models`). */
  models?: Record<string, Route>;
  /** Priority class → provider and/or model (CONFIG_FILE `routing`). */
  routing?: Partial<Record<Priority, Route>>;
  /** Undefined: no circuit breakers (every provider is always tried). */
  breaker?: ChainBreakerOptions | undefined;
  maxAttempts: number;
  maxRateLimitedRetries: number;
  backoff?: BackoffOptions;
  /** Longest Retry-After honoured before retrying (default 60 s); a larger one is clamped. */
  maxRetryAfterMs?: number;
  /** Jitter source for backoff (default Math.random); injectable so tests can pin delays. */
  random?: () => number;
  logger: Logger;
  /** Epoch ms; injectable for the breakers' sake. */
  clock?: () => number;
}

export interface ProviderHealth {
  name: string;
  /** As last seen by this instance. */
  circuit: CircuitState;
  /** Whether a call may go to it now: closed, or open with its cool-down over (a probe may go). */
  available: boolean;
  keys: KeyRingHealth;
}

const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 200, maxMs: 5000 };
const DEFAULT_MAX_RETRY_AFTER_MS = 60_000;
/** A probe's lease outlives its attempt (timeout + backoff) by this much. */
const PROBE_LEASE_MARGIN_MS = 5000;

interface Member {
  provider: Provider;
  breaker: Breaker | undefined;
}

type Failure = Exclude<Outcome, { kind: 'ok' } | { kind: 'rate_limited' }>;

/** What the scan of the candidates found. */
type Selection =
  | { kind: 'go'; member: Member; position: number; keyIndex: number; permit: Permit }
  /** Nothing now, but a rate-limited key is ready at `readyAt`. */
  | { kind: 'wait'; readyAt: number }
  /** Nothing will be: circuits open, keys refused. */
  | { kind: 'none'; reasons: string[]; retryAt: number | undefined };

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw shuttingDown();
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(shuttingDown());
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(shuttingDown());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

const seconds = (ms: number): string => `${(Math.max(0, ms) / 1000).toFixed(1)} s`;

export class ProviderChain {
  private readonly members: Member[];
  private readonly models: Record<string, Route>;
  private readonly routing: Partial<Record<Priority, Route>>;
  private readonly backoff: BackoffOptions;
  private readonly maxRetryAfterMs: number;
  private readonly random: () => number;
  private readonly clock: () => number;
  private readonly logger: Logger;
  /** Read once: per-call debug lines are skipped without building their logger. */
  private readonly debugLines: boolean;
  private closed = false;

  constructor(private readonly opts: ProviderChainOptions) {
    if (opts.providers.length === 0) throw new Error('ProviderChain needs at least one provider');
    const names = new Set<string>();
    this.logger = opts.logger;
    this.debugLines = opts.logger.isLevelEnabled('debug');
    this.clock = opts.clock ?? Date.now;
    this.backoff = opts.backoff ?? DEFAULT_BACKOFF;
    this.maxRetryAfterMs = opts.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
    this.random = opts.random ?? Math.random;
    this.models = opts.models ?? {};
    this.routing = opts.routing ?? {};
    this.members = opts.providers.map((settings) => {
      if (names.has(settings.name)) throw new Error(`provider name "${settings.name}" is used twice`);
      names.add(settings.name);
      const provider = new Provider(settings);
      const b = opts.breaker;
      const config: BreakerConfig | undefined = b && {
        consecutiveFailures: b.consecutiveFailures,
        errorRate: b.errorRate,
        windowMs: b.windowMs,
        minCalls: b.minCalls,
        cooldownMs: b.cooldownMs,
        probeLeaseMs: provider.timeoutMs + this.backoff.maxMs + PROBE_LEASE_MARGIN_MS,
      };
      const breaker =
        b && config ? new Breaker(settings.name, b.store, config, this.logger.child({ module: 'breaker' }), this.clock) : undefined;
      return { provider, breaker };
    });
    for (const [where, route] of [
      ...Object.entries(this.routing).map(([p, r]) => [`routing.${p}`, r] as const),
      ...Object.entries(this.models).map(([m, r]) => [`models.${m}`, r] as const),
    ]) {
      if (route?.provider !== undefined && !names.has(route.provider)) {
        throw new Error(`${where}: unknown provider "${route.provider}"`);
      }
    }
  }

  /** Provider names in chain order. */
  get providerNames(): string[] {
    return this.members.map((m) => m.provider.name);
  }

  /** Circuit and key health per provider, as this instance last saw it (logs, metrics). */
  health(): ProviderHealth[] {
    const now = this.clock();
    return this.members.map(({ provider, breaker }) => ({
      name: provider.name,
      circuit: breaker?.state ?? 'closed',
      available: breaker?.mayAdmit(now) ?? true,
      keys: provider.keys.health(now),
    }));
  }

  /**
   * The config's route for a call: routing[priority] first (it may pick a model, a provider or
   * both), then the model map for the resulting model (an alias to another model, a provider,
   * or both). `model` is undefined when config names none.
   *
   * Embeddings: routing[priority]'s provider applies, its model does not (it names a chat
   * model, as a provider's default model does); the model map applies to the requested
   * embedding model as it does to a chat model.
   */
  resolve(priority: Priority, requestedModel: string | undefined, kind: RequestKind = 'chat'): Route {
    const byPriority = this.routing[priority];
    const routedModel = kind === 'chat' ? byPriority?.model : undefined;
    const model = routedModel ?? requestedModel;
    const byModel = model !== undefined && Object.hasOwn(this.models, model) ? this.models[model] : undefined;
    return {
      provider: byPriority?.provider ?? byModel?.provider,
      model: byModel ? (byModel.model ?? model) : routedModel,
    };
  }

  /**
   * The model sent to `provider`: on the route's own provider, the route's model, else the
   * provider's, else the body's (the request's, else UPSTREAM_MODEL). On any other provider
   * (failing over from a routed one, or no provider routed) the provider's own model wins —
   * a fallback's FALLBACK_MODEL names what it serves, and another vendor may not know the
   * primary's model names — then a provider-less route's model, then the body's.
   *
   * Embeddings never get a provider's own model (FALLBACK_MODEL, a file provider's `model`):
   * those are chat models. So an embeddings call sends the route's model on the route's
   * provider, a provider-less route's model anywhere, else the body's (the request's, else
   * CONFIG_FILE `embeddingModel`).
   */
  modelFor(provider: Provider, route: Route, bodyModel: string, kind: RequestKind = 'chat'): string {
    const own = kind === 'chat' ? provider.model : undefined;
    if (route.provider === provider.name) return route.model ?? own ?? bodyModel;
    return own ?? (route.provider === undefined ? route.model : undefined) ?? bodyModel;
  }

  async call(req: UpstreamCall): Promise<UpstreamResult> {
    if (this.closed) throw shuttingDown();
    const log = lazyChild(this.logger, { reqId: req.requestId, deviceId: req.deviceId });
    const { maxRateLimitedRetries } = this.opts;
    const maxAttempts = Math.max(1, Math.min(req.maxAttempts ?? this.opts.maxAttempts, this.opts.maxAttempts));
    const shape: AnswerShape = isEmbeddingsBody(req.body)
      ? { kind: 'embeddings', single: typeof req.body.input === 'string', count: typeof req.body.input === 'string' ? 1 : req.body.input.length }
      : CHAT_SHAPE;
    const route = this.resolve(req.priority, req.requestedModel, shape.kind);
    const candidates = this.candidates(route);
    const payloads = new Map<string, { payload: string; model: string }>();
    const payloadFor = (provider: Provider): { payload: string; model: string } => {
      const model = this.modelFor(provider, route, req.body.model, shape.kind);
      let entry = payloads.get(model);
      if (!entry) {
        entry = { payload: JSON.stringify({ ...req.body, model }), model };
        payloads.set(model, entry);
      }
      return entry;
    };

    let counted = 0; // attempts that count against maxAttempts
    let timeouts = 0; // of those, how many timed out
    let rateLimited = 0; // 429s so far
    let requests = 0; // HTTP requests made, 429s included
    let last: Failure | undefined;
    let lastRetryAfterMs: number | undefined;
    let waitMs = 0;
    let position = 0; // where the next scan of the candidates starts
    let lastFailed: Provider | undefined; // the provider of the last counted failure

    const exhausted = (why: string, retryAfterMs?: number): BridgeError => {
      const lastMessage = last?.message ?? 'no attempt ran';
      const allTimedOut = counted > 0 && timeouts === counted;
      const plural = counted === 1 ? 'attempt' : 'attempts';
      return allTimedOut
        ? new BridgeError('upstream_timeout', `${why}: no answer within ${this.timeoutOf(lastFailed)} ms in ${counted} ${plural}`, retryAfterMs)
        : new BridgeError('upstream_error', `${why}: upstream failed after ${counted} ${plural}; last: ${lastMessage}`, retryAfterMs);
    };

    // The contract defines `expired` as "ttl_ms passed before an upstream call could start".
    // So it is only the answer while no counted attempt has run; 429s do not count, since the
    // upstream refused to start the work (and the contract says their wait counts against
    // ttl_ms). Once an attempt has run and failed, the deadline merely ends the retries and
    // the call fails with that failure's code (upstream_error / upstream_timeout), which tells
    // the device more than `expired` would.
    const checkDeadline = (startAt: number): void => {
      if (req.deadline === undefined || startAt < req.deadline) return;
      if (counted > 0) throw exhausted('ttl_ms passed before the next attempt could start');
      const note = rateLimited > 0 ? ` (upstream answered 429 ${rateLimited} times)` : '';
      throw new BridgeError('expired', `ttl_ms passed before an upstream call could start${note}`, lastRetryAfterMs);
    };

    for (;;) {
      if (waitMs > 0) {
        // Never sleep past the deadline: fail now rather than wake up too late to start.
        checkDeadline(Date.now() + waitMs);
        await sleep(waitMs, req.signal);
        waitMs = 0;
      }
      throwIfAborted(req.signal);
      checkDeadline(Date.now());

      const selection = await this.select(candidates, position);
      if (selection.kind === 'wait') {
        // Other calls cooled the keys meanwhile (their 429s reported the pause): wait for the first.
        waitMs = Math.max(1, Math.min(selection.readyAt - this.clock(), this.maxRetryAfterMs));
        lastRetryAfterMs = waitMs;
        position = 0;
        continue;
      }
      if (selection.kind === 'none') {
        const retryAfterMs = selection.retryAt === undefined ? undefined : Math.max(0, selection.retryAt - this.clock());
        const why = `no provider available (${selection.reasons.join('; ')})`;
        log().warn({ attempt: counted, reasons: selection.reasons }, 'no upstream provider available');
        if (counted > 0) throw exhausted(why, retryAfterMs);
        throw new BridgeError('upstream_error', why, retryAfterMs);
      }

      const { member, keyIndex, permit } = selection;
      const { provider } = member;
      const { payload, model } = payloadFor(provider);
      let outcome: Outcome;
      try {
        requests += 1;
        if (req.beforeAttempt) await req.beforeAttempt(requests);
        throwIfAborted(req.signal);
        // beforeAttempt may have waited (rate-limit tokens, lock lease), so look again.
        checkDeadline(Date.now());
        if (this.debugLines) {
          log().debug(
            { attempt: counted + 1, request: requests, provider: provider.name, model, keyId: provider.keys.idOf(keyIndex) },
            'upstream attempt',
          );
        }
        outcome = await provider.attempt(payload, model, provider.headers(req.headers, keyIndex), req.signal, shape);
      } catch (err) {
        // The attempt never ran (or was aborted): hand a half-open probe back at once.
        await member.breaker?.release(permit);
        throw err;
      }
      // The breaker learns about the provider's health only; 4xx answers show it is up.
      await member.breaker?.record(permit, outcome.kind !== 'retry', outcome.kind === 'retry' ? outcome.message : undefined);

      if (outcome.kind === 'ok') {
        const { completion, ms } = outcome;
        if (this.debugLines) {
          log().debug({ attempts: counted + 1, upstreamMs: Math.round(ms), provider: provider.name, model: completion.model }, 'upstream answered');
        }
        return { ...completion, attempts: counted + 1, upstreamMs: ms, provider: provider.name };
      }

      if (outcome.kind === 'rate_limited') {
        rateLimited += 1;
        const asked = outcome.retryAfterMs;
        const coolMs = Math.min(asked ?? backoffDelayMs(rateLimited, this.backoff, this.random), this.maxRetryAfterMs);
        const now = this.clock();
        provider.keys.cool(keyIndex, now + coolMs);
        lastRetryAfterMs = coolMs;
        // Wait only when no other key or provider can take the call now; then the whole
        // chain is rate-limited and the fleet should pause (reported even when we give up).
        const othersReadyAt = this.chainReadyAt(candidates, now, { provider, keyIndex });
        if (othersReadyAt !== undefined && othersReadyAt <= now) {
          waitMs = 0;
        } else {
          waitMs = othersReadyAt === undefined ? coolMs : Math.min(othersReadyAt - now, coolMs);
          lastRetryAfterMs = waitMs;
          req.onRateLimited?.(waitMs);
        }
        if (rateLimited > maxRateLimitedRetries) {
          throw new BridgeError(
            'upstream_error',
            `upstream still rate-limited after ${maxRateLimitedRetries} retries: ${outcome.message}`,
            lastRetryAfterMs,
          );
        }
        // This provider's other keys first; after a wait for the whole chain, the preferred order again.
        position = waitMs > 0 ? 0 : selection.position;
        log().warn(
          {
            status: 429,
            provider: provider.name,
            keyId: provider.keys.idOf(keyIndex),
            attempt: counted,
            rateLimited,
            coolMs,
            delayMs: waitMs,
            retryAfter: asked !== undefined,
          },
          waitMs > 0 ? 'upstream rate-limited; every key of the chain is cooling, waiting' : 'upstream rate-limited; key cooling, trying another',
        );
        continue;
      }

      counted += 1;
      last = outcome;
      if (outcome.kind === 'retry' && outcome.timeout) timeouts += 1;

      if (outcome.kind === 'fatal') {
        log().warn({ status: outcome.status, attempt: counted, provider: provider.name }, 'upstream refused the request');
        throw new BridgeError('upstream_error', outcome.message);
      }

      if (outcome.kind === 'bad_key') {
        if (provider.keys.revoke(keyIndex)) {
          log().warn(
            { status: outcome.status, provider: provider.name, keyId: provider.keys.idOf(keyIndex), reason: outcome.message },
            'upstream refused an API key: taken out of rotation',
          );
        }
        position = selection.position; // this provider's other keys first
        waitMs = 0; // a different key is a fresh start, not a struggling upstream
      } else {
        lastFailed = provider;
        position = (selection.position + 1) % candidates.length;
        // Back off only when the next attempt would go to the provider that just failed. When
        // none looks available (its circuit just opened), look now: failing fast beats a backoff.
        const next = this.peek(candidates, position, this.clock());
        waitMs = next === member ? backoffDelayMs(counted, this.backoff, this.random) : 0;
      }

      if (counted >= maxAttempts) {
        log().warn({ status: outcome.status, attempt: counted, provider: provider.name }, 'upstream attempts exhausted');
        throw exhausted('out of attempts');
      }
      log().warn(
        {
          status: outcome.status,
          attempt: counted,
          provider: provider.name,
          delayMs: waitMs,
          reason: outcome.message,
          keyId: provider.keys.idOf(keyIndex),
        },
        'upstream attempt failed; retrying',
      );
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const m of this.members) m.breaker?.close();
    await Promise.all(this.members.map((m) => m.provider.close()));
  }

  private timeoutOf(provider: Provider | undefined): number {
    return (provider ?? this.members[0]?.provider)?.timeoutMs ?? 0;
  }

  /** The route's provider first, then the chain order. */
  private candidates(route: Route): Member[] {
    if (route.provider === undefined) return this.members;
    const pinned = this.members.find((m) => m.provider.name === route.provider);
    return pinned ? [pinned, ...this.members.filter((m) => m !== pinned)] : this.members;
  }

  /**
   * The first candidate from `start` (wrapping around) with a key ready and a circuit that
   * admits the call. The key check comes first: it is local, and the breaker's admission may
   * grant the half-open probe, which must then be used.
   */
  private async select(candidates: Member[], start: number): Promise<Selection> {
    const reasons: string[] = [];
    let readyAt: number | undefined;
    let retryAt: number | undefined;
    for (let step = 0; step < candidates.length; step += 1) {
      const position = (start + step) % candidates.length;
      const member = candidates[position] as Member;
      const { provider, breaker } = member;
      const now = this.clock();
      const keysReady = provider.keys.readyAt(now);
      if (keysReady === undefined) {
        reasons.push(`${provider.name}: every API key was refused`);
        continue;
      }
      if (keysReady > now) {
        readyAt = readyAt === undefined ? keysReady : Math.min(readyAt, keysReady);
        continue;
      }
      let permit: Permit = { probe: undefined };
      if (breaker) {
        const admission = await breaker.acquire();
        if (!admission.ok) {
          retryAt = retryAt === undefined ? admission.retryAt : Math.min(retryAt, admission.retryAt);
          reasons.push(
            admission.state === 'open'
              ? `${provider.name}: circuit open, half-opens in ${seconds(admission.retryAt - now)}`
              : `${provider.name}: circuit half-open, its probe call is running`,
          );
          continue;
        }
        permit = admission.permit;
      }
      // Another call may have cooled the last ready key while the breaker answered.
      const keyIndex = provider.keys.pick(this.clock());
      if (keyIndex === undefined) {
        await breaker?.release(permit);
        const again = provider.keys.readyAt(this.clock());
        if (again !== undefined) readyAt = readyAt === undefined ? again : Math.min(readyAt, again);
        else reasons.push(`${provider.name}: every API key was refused`);
        continue;
      }
      return { kind: 'go', member, position, keyIndex, permit };
    }
    if (readyAt !== undefined) return { kind: 'wait', readyAt };
    return { kind: 'none', reasons, retryAt };
  }

  /** Without a round trip: the candidate the next scan from `start` will most likely pick. */
  private peek(candidates: Member[], start: number, now: number): Member | undefined {
    for (let step = 0; step < candidates.length; step += 1) {
      const member = candidates[(start + step) % candidates.length] as Member;
      const keysReady = member.provider.keys.readyAt(now);
      if (keysReady !== undefined && keysReady <= now && (member.breaker?.mayAdmit(now) ?? true)) return member;
    }
    return undefined;
  }

  /**
   * When the chain can take a call on a key other than `except` (the one that just answered
   * 429), as far as this instance knows: now if some candidate has such a key ready (and its
   * circuit is not known to be open), else the end of the earliest cool-down; undefined when
   * no other key is left at all.
   */
  private chainReadyAt(candidates: Member[], now: number, except: { provider: Provider; keyIndex: number }): number | undefined {
    let earliest: number | undefined;
    for (const { provider, breaker } of candidates) {
      const at = provider.keys.readyAt(now, provider === except.provider ? except.keyIndex : undefined);
      if (at === undefined) continue;
      if (at <= now && breaker && !breaker.mayAdmit(now)) continue;
      earliest = earliest === undefined ? at : Math.min(earliest, at);
    }
    return earliest;
  }
}
