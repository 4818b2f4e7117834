// Who a refusal of a key (401/403) is about. Gateways answer 403 for a model the key may not
// use, and devices choose the model: so one refusal sets nothing aside. The key is set aside
// (for a bounded time, the reason logged by the key's short hash) only on evidence about the
// key itself: a probe with it that is refused too; or, when the probe cannot tell (no GET
// /models), a refusal for a model the key has answered before, or refusals for several
// different models since its last answer (key-probe.ts).
import { BridgeError } from '../../contract/index.js';
import type { LazyLog } from '../logger.js';
import { MODELS_FOR_EVIDENCE } from './keys.js';
import type { Outcome } from './outcome.js';
import type { Provider } from './provider.js';

/**
 * What a refusal was about: the request (which fails alone, with `error`), or possibly the key
 * (try another; `setAside` when the evidence took it out of rotation).
 */
export type Blame = { about: 'request'; error: BridgeError } | { about: 'key'; setAside: boolean };

export interface RefusalContext {
  provider: Provider;
  keyIndex: number;
  /** The model the refused attempt named. */
  model: string;
  clock: () => number;
  setAsideMs: number;
  log: LazyLog;
}

export async function blameRefusal(ctx: RefusalContext, outcome: Extract<Outcome, { kind: 'key_refused' }>): Promise<Blame> {
  const { provider, keyIndex, model } = ctx;
  // A call that picked the key before another call set it aside: nothing left to judge.
  if (provider.keys.isAside(keyIndex, ctx.clock())) return { about: 'key', setAside: true };
  const verdict = await provider.checkKey(keyIndex, model);
  if (verdict.kind === 'accepted') {
    ctx
      .log()
      .warn(
        { status: outcome.status, provider: provider.name, keyId: provider.keys.idOf(keyIndex), model },
        'upstream refused the request, not the key (the key answers GET /models)',
      );
    const text = outcome.message.replace(/^upstream answered (\d+): /, '$1 ');
    const message = `the upstream refused the request: ${text} (model "${model}"; the API key itself is accepted)`;
    return { about: 'request', error: new BridgeError('invalid_request', message) };
  }
  if (verdict.kind === 'refused') {
    setKeyAside(ctx, `GET /models with it answered ${verdict.status}: ${verdict.message}`);
    return { about: 'key', setAside: true };
  }
  if (provider.keys.hasAnswered(keyIndex, model)) {
    setKeyAside(ctx, `refused for model "${model}", which it answered before (${verdict.reason})`);
    return { about: 'key', setAside: true };
  }
  const models = provider.keys.noteRefusedModel(keyIndex, model);
  if (models < MODELS_FOR_EVIDENCE) return { about: 'key', setAside: false };
  setKeyAside(ctx, `refused for ${models} different models since its last answer (${verdict.reason})`);
  return { about: 'key', setAside: true };
}

/** Takes the key out of rotation for setAsideMs, logged once with the reason (never the key). */
export function setKeyAside(ctx: Omit<RefusalContext, 'model'>, reason: string): void {
  const { provider, keyIndex, clock, setAsideMs } = ctx;
  const now = clock();
  provider.forgetKeyVerdict(keyIndex);
  if (!provider.keys.setAside(keyIndex, now + setAsideMs, now)) return;
  ctx
    .log()
    .warn(
      { provider: provider.name, keyId: provider.keys.idOf(keyIndex), setAsideMs, reason },
      'upstream API key set aside: it is tried again after setAsideMs',
    );
}
