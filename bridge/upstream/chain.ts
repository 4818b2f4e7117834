// The provider chain: the one place the bridge decides where an upstream call goes, for chat
// and embeddings calls alike (the body decides the endpoint and how the answer is read). Per
// attempt a call (chain-call.ts) picks a provider (route first, then the chain order; open
// circuits and providers without a usable key are skipped), makes ONE HTTP attempt there
// (Provider.attempt), records the outcome in that provider's breaker and key ring, and decides
// what comes next:
//
// - ok: done; the reply names the model that answered and the provider.
// - retryable failure (network, timeout, 5xx, unusable 200): counts against MAX_ATTEMPTS and
//   the breaker; the next attempt starts at the NEXT provider in the order, so a request
//   whose primary is down is answered by the fallback within the same request. Backoff is
//   slept only when the next attempt goes back to the provider that just failed.
// - 401/403: counts an attempt, and the key is probed (GET {baseUrl}/models with it,
//   key-refusal.ts). Probe answered: the refusal was about the request (e.g. a model the key
//   may not use), which fails alone with invalid_request. Probe refused too (or, when the
//   probe cannot tell, refusals for several models since the key's last answer): the key is
//   set aside for KEY_SET_ASIDE_MS, then tried again. Otherwise the key stays. Either way
//   another key or provider is tried at once. A 429 for an exhausted quota sets the key aside.
// - 400/404/413/422, or a request undici cannot send (a header, a body): the request's own
//   fault. It fails at once with invalid_request, on no other provider, and is no breaker
//   event and no key failure.
// - 429: not counted (up to MAX_RATE_LIMITED_RETRIES per request); that key cools for its
//   Retry-After; the call moves on at once to another healthy key or provider. Only when the
//   whole chain is rate-limited (no provider that could take the call has a key ready) does it
//   wait, and only then does it call onRateLimited, which pauses dispatch fleet-wide.
// - any other 4xx: the request is refused; it fails at once (upstream_error), on no other provider.
//
// MAX_ATTEMPTS counts attempts across the whole chain. When every provider is unavailable
// (circuits open, the half-open probe taken by another call, or every key refused) the call
// fails at once with upstream_error "no provider available (…)" and a retry_after_ms of the
// earliest half-open time: it does not wait out a cool-down (a request's ttl_ms is usually
// shorter, and its device is better told now).
import type { AttemptCounts } from './attempt-stats.js';
import type { Route } from '../config/config-file.js';
import type { Priority, RequestKind } from '../../contract/index.js';
import type { Logger } from '../logger.js';
import type { BackoffOptions } from './backoff.js';
import { Breaker, type BreakerConfig, type BreakerStore, type CircuitState } from './breaker.js';
import { isEmbeddingsBody, type UpstreamBody } from './body.js';
import type { UpstreamCall, UpstreamResult } from './call.js';
import { ChainCall, type ChainSettings } from './chain-call.js';
import { candidatesFor, type Member } from './candidates.js';
import { KEY_SET_ASIDE_MS, type KeyRingHealth } from './keys.js';
import { Provider, shuttingDown, type ProviderOptions } from './provider.js';
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
  /** How long a key shown to be refused stays out of rotation (default KEY_SET_ASIDE_MS). */
  keySetAsideMs?: number;
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

/** What a body asks for, so the answer is read accordingly. */
function shapeOf(body: UpstreamBody): AnswerShape {
  if (!isEmbeddingsBody(body)) return CHAT_SHAPE;
  const single = typeof body.input === 'string';
  return { kind: 'embeddings', single, count: single ? 1 : body.input.length };
}

function settingsOf(opts: ProviderChainOptions): ChainSettings {
  return {
    maxAttempts: opts.maxAttempts,
    maxRateLimitedRetries: opts.maxRateLimitedRetries,
    backoff: opts.backoff ?? DEFAULT_BACKOFF,
    maxRetryAfterMs: opts.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS,
    random: opts.random ?? Math.random,
    clock: opts.clock ?? Date.now,
    logger: opts.logger,
    debugLines: opts.logger.isLevelEnabled('debug'),
    keySetAsideMs: opts.keySetAsideMs ?? KEY_SET_ASIDE_MS,
  };
}

/** A provider and its breaker, whose probe lease covers one attempt and its backoff. */
function memberOf(options: ProviderOptions, breaker: ChainBreakerOptions | undefined, settings: ChainSettings): Member {
  const provider = new Provider(options);
  if (!breaker) return { provider, breaker: undefined };
  const config: BreakerConfig = {
    consecutiveFailures: breaker.consecutiveFailures,
    errorRate: breaker.errorRate,
    windowMs: breaker.windowMs,
    minCalls: breaker.minCalls,
    cooldownMs: breaker.cooldownMs,
    probeLeaseMs: provider.timeoutMs + settings.backoff.maxMs + PROBE_LEASE_MARGIN_MS,
  };
  const logger = settings.logger.child({ module: 'breaker' });
  return { provider, breaker: new Breaker(options.name, breaker.store, config, logger, settings.clock) };
}

export class ProviderChain {
  private readonly members: Member[];
  private readonly models: Record<string, Route>;
  private readonly routing: Partial<Record<Priority, Route>>;
  private readonly settings: ChainSettings;
  private closed = false;

  constructor(opts: ProviderChainOptions) {
    if (opts.providers.length === 0) throw new Error('ProviderChain needs at least one provider');
    this.settings = settingsOf(opts);
    this.models = opts.models ?? {};
    this.routing = opts.routing ?? {};
    const names = new Set<string>();
    this.members = opts.providers.map((options) => {
      if (names.has(options.name)) throw new Error(`provider name "${options.name}" is used twice`);
      names.add(options.name);
      return memberOf(options, opts.breaker, this.settings);
    });
    this.checkRoutes(names);
  }

  /** Provider names in chain order. */
  get providerNames(): string[] {
    return this.members.map((m) => m.provider.name);
  }

  /** Circuit and key health per provider, as this instance last saw it (logs, metrics). */
  health(): ProviderHealth[] {
    const now = this.settings.clock();
    return this.members.map(({ provider, breaker }) => ({
      name: provider.name,
      circuit: breaker?.state ?? 'closed',
      available: breaker?.mayAdmit(now) ?? true,
      keys: provider.keys.health(now),
    }));
  }

  /** Each provider's attempts since the last call (the operator dashboard takes them every tick). */
  takeAttemptStats(): Array<{ name: string } & AttemptCounts> {
    return this.members.map(({ provider }) => ({ name: provider.name, ...provider.stats.take() }));
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
    const shape = shapeOf(req.body);
    const route = this.resolve(req.priority, req.requestedModel, shape.kind);
    const modelFor = (provider: Provider): string => this.modelFor(provider, route, req.body.model, shape.kind);
    return new ChainCall(this.settings, req, shape, candidatesFor(this.members, route), modelFor).run();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const m of this.members) m.breaker?.close();
    await Promise.all(this.members.map((m) => m.provider.close()));
  }

  /** Every route names a provider of the chain, or none. */
  private checkRoutes(names: Set<string>): void {
    for (const [where, route] of [
      ...Object.entries(this.routing).map(([p, r]) => [`routing.${p}`, r] as const),
      ...Object.entries(this.models).map(([m, r]) => [`models.${m}`, r] as const),
    ]) {
      if (route?.provider !== undefined && !names.has(route.provider)) {
        throw new Error(`${where}: unknown provider "${route.provider}"`);
      }
    }
  }
}
