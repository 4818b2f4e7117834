// A provider's API keys: which one the next attempt uses, and which are cooling or set aside.
import { createHash } from 'node:crypto';

/** How long a key shown to be refused stays out of rotation before it is tried again. */
export const KEY_SET_ASIDE_MS = 5 * 60_000;
/**
 * Refusals (401/403) for this many different models since the key's last answer, when a probe
 * cannot tell, are evidence about the key rather than about the models the devices named.
 */
export const MODELS_FOR_EVIDENCE = 3;
/** Models remembered per key as answered with it (the most recent); a refusal for one of them is about the key. */
const ANSWERED_MODELS = 16;

/** One key's health, for logs and (later) metrics. */
export interface KeyRingHealth {
  total: number;
  healthy: number;
  /** Rate-limited (429): out of rotation until their Retry-After passes. */
  cooling: number;
  /** Set aside (shown refused, exhausted quota): out of rotation until their set-aside time passes. */
  revoked: number;
  /** Each key by its short hash (never the key), in configuration order. */
  list: Array<{ id: string; state: 'healthy' | 'cooling' | 'revoked' }>;
}

/**
 * A provider's API keys, rotated round-robin over the healthy ones. Health is process-wide
 * (every call shares it), so one call's lesson spares the others:
 * - `setAside` (evidence about the key: a probe refused, an exhausted quota) takes a key out
 *   of rotation for a bounded time, after which it is tried again;
 * - `cool` (429) takes it out until its Retry-After has passed.
 * A single 401/403 does not: it may be about the request's model (chain-call.ts decides).
 *
 * A provider configured without keys has one keyless entry (no Authorization header), so a
 * keyless provider shown to be refused is set aside the same way.
 *
 * A key is never logged: `idOf` gives a short sha256 prefix that identifies it in logs
 * without revealing it.
 */
export class KeyRing {
  private next = 0;
  private readonly entries: ReadonlyArray<string | undefined>;
  private readonly ids: string[];
  private readonly coolUntil: number[];
  private readonly asideUntil: number[];
  /** Models refused (401/403) per key since its last answer; at most MODELS_FOR_EVIDENCE each. */
  private readonly refusedModels: Array<Set<string>>;
  /** Models each key has answered, most recent last; at most ANSWERED_MODELS each. */
  private readonly answeredModels: Array<Set<string>>;

  constructor(keys: readonly string[]) {
    this.entries = keys.length > 0 ? [...keys] : [undefined];
    this.ids = this.entries.map((key) => (key === undefined ? 'none' : createHash('sha256').update(key).digest('hex').slice(0, 8)));
    this.coolUntil = this.entries.map(() => 0);
    this.asideUntil = this.entries.map(() => 0);
    this.refusedModels = this.entries.map(() => new Set<string>());
    this.answeredModels = this.entries.map(() => new Set<string>());
  }

  /** Configured keys (0 for a keyless provider). */
  get size(): number {
    return this.entries[0] === undefined ? 0 : this.entries.length;
  }

  /**
   * The next healthy key, round-robin; undefined when none is usable at `now` (see readyAt).
   * Each pick advances the ring, so concurrent calls spread over the healthy keys.
   */
  pick(now: number): number | undefined {
    const n = this.entries.length;
    for (let step = 0; step < n; step += 1) {
      const index = (this.next + step) % n;
      if (this.usable(index, now)) {
        this.next = (index + 1) % n;
        return index;
      }
    }
    return undefined;
  }

  /**
   * `now` when a key is usable now, the earliest end of a cool-down, or undefined when every
   * key is set aside; `except` leaves one key out (the one that just failed).
   */
  readyAt(now: number, except?: number): number | undefined {
    let earliest: number | undefined;
    for (let index = 0; index < this.entries.length; index += 1) {
      if (this.isAside(index, now) || index === except) continue;
      const at = Math.max(now, this.coolUntil[index] ?? 0);
      if (earliest === undefined || at < earliest) earliest = at;
    }
    return earliest;
  }

  /** Out of rotation until `untilMs`; true when it was in rotation (so the caller logs it once). */
  setAside(index: number, untilMs: number, now: number): boolean {
    const was = this.isAside(index, now);
    if ((this.asideUntil[index] ?? Infinity) < untilMs) this.asideUntil[index] = untilMs;
    this.refusedModels[index]?.clear();
    return !was;
  }

  /** Notes a 401/403 for `model`; returns how many different models were refused since the key's last answer. */
  noteRefusedModel(index: number, model: string): number {
    const models = this.refusedModels[index];
    if (models === undefined) return 0;
    // Bounded: past the threshold nothing more is learnt from another name.
    if (models.size < MODELS_FOR_EVIDENCE) models.add(model);
    return models.size;
  }

  /** The key answered `model`: earlier refusals were about their models, not the key. */
  answered(index: number, model: string): void {
    const refused = this.refusedModels[index];
    if (refused !== undefined && refused.size > 0) refused.clear();
    const answered = this.answeredModels[index];
    if (answered === undefined || answered.has(model)) return;
    answered.add(model);
    if (answered.size > ANSWERED_MODELS) answered.delete(answered.values().next().value as string);
  }

  /** Whether the key has answered `model` (among the last ANSWERED_MODELS it answered). */
  hasAnswered(index: number, model: string): boolean {
    return this.answeredModels[index]?.has(model) ?? false;
  }

  /** Whether the key is set aside at `now`. */
  isAside(index: number, now: number): boolean {
    return (this.asideUntil[index] ?? Infinity) > now;
  }

  /** Out of rotation until `untilMs`; never shortens a cool-down already running. */
  cool(index: number, untilMs: number): void {
    if ((this.coolUntil[index] ?? Infinity) < untilMs) this.coolUntil[index] = untilMs;
  }

  key(index: number): string | undefined {
    return this.entries[index];
  }

  /** The short hash that stands for the key in logs; `none` for a keyless provider. */
  idOf(index: number): string {
    return this.ids[index] ?? 'none';
  }

  health(now: number): KeyRingHealth {
    const list = this.entries.map((_, index) => ({ id: this.idOf(index), state: this.stateOf(index, now) }));
    const count = (state: string): number => list.filter((k) => k.state === state).length;
    return { total: list.length, healthy: count('healthy'), cooling: count('cooling'), revoked: count('revoked'), list };
  }

  private stateOf(index: number, now: number): 'healthy' | 'cooling' | 'revoked' {
    if (this.isAside(index, now)) return 'revoked';
    return (this.coolUntil[index] ?? 0) > now ? 'cooling' : 'healthy';
  }

  private usable(index: number, now: number): boolean {
    return !this.isAside(index, now) && (this.coolUntil[index] ?? 0) <= now;
  }
}
