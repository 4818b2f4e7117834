// Evidence about a key: when an answer refuses a key (401/403), the refusal may be about the
// request (gateways answer 403 for a model the key may not use, and devices choose the model)
// or about the key. A probe tells them apart: GET {baseUrl}/models with that key, which asks
// for nothing a device chose. One probe per key and refused model at a time, its verdict kept
// for a while: a flood of requests refused for one model costs the upstream one probe per key
// per PROBE_TTL_MS, and a refusal for another model (an innocent's, after the key was really
// revoked) is judged afresh rather than by an older acceptance.
import type { Dispatcher } from 'undici';
import { exchange } from './exchange.js';
import { readError } from './response.js';

/** How long a probe's verdict stands before a new refusal probes again. */
export const PROBE_TTL_MS = 30_000;
/** A probe waits at most this long (or the provider's attempt timeout, if shorter). */
const PROBE_TIMEOUT_MS = 10_000;
/** Verdicts kept per key (by model); the oldest is dropped past it. */
const MODELS_PER_KEY = 64;

export type KeyVerdict =
  /** GET /models with the key was answered: the key is good, the refusal was about the request. */
  | { kind: 'accepted' }
  /** GET /models with the key was itself refused: the key is. */
  | { kind: 'refused'; status: number; message: string }
  /** The probe could not tell (no /models endpoint, an error, a timeout). */
  | { kind: 'unknown'; reason: string };

interface Probe {
  at: number;
  verdict: Promise<KeyVerdict>;
}

export class KeyProbe {
  private readonly probes = new Map<number, Map<string, Probe>>();
  private readonly timeoutMs: number;

  constructor(
    private readonly pool: Dispatcher,
    private readonly path: string,
    timeoutMs: number,
    private readonly clock: () => number = Date.now,
  ) {
    this.timeoutMs = Math.min(timeoutMs, PROBE_TIMEOUT_MS);
  }

  /** The verdict on key `index` (sent as `authorization`, undefined for a keyless provider) after a refusal for `model`. */
  check(index: number, authorization: string | undefined, model: string): Promise<KeyVerdict> {
    const now = this.clock();
    let byModel = this.probes.get(index);
    if (byModel === undefined) this.probes.set(index, (byModel = new Map()));
    const known = byModel.get(model);
    if (known !== undefined && now - known.at < PROBE_TTL_MS) return known.verdict;
    const verdict = this.run(authorization);
    byModel.delete(model);
    byModel.set(model, { at: now, verdict });
    if (byModel.size > MODELS_PER_KEY) byModel.delete(byModel.keys().next().value as string);
    return verdict;
  }

  /** Forgets a key's verdicts (it was set aside: when it comes back, it is judged afresh). */
  forget(index: number): void {
    this.probes.delete(index);
  }

  private async run(authorization: string | undefined): Promise<KeyVerdict> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (authorization !== undefined) headers['authorization'] = authorization;
    const result = await exchange(this.pool, { path: this.path, method: 'GET', headers }, this.timeoutMs, undefined);
    if (result.kind === 'timeout') return { kind: 'unknown', reason: `GET /models: no answer within ${this.timeoutMs} ms` };
    if (result.kind !== 'response') return { kind: 'unknown', reason: `GET /models: ${result.kind === 'error' ? result.error.message : result.kind}` };
    const { status } = result;
    if (status >= 200 && status < 300) return { kind: 'accepted' };
    const key = authorization?.replace(/^Bearer /, '');
    const text = key ? result.text.split(key).join('[redacted]') : result.text;
    if (status === 401 || status === 403) return { kind: 'refused', status, message: readError(text).message };
    return { kind: 'unknown', reason: `GET /models answered ${status}` };
  }
}
