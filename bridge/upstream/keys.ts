// A provider's API keys: which one the next attempt uses, and which are cooling or refused.
import { createHash } from 'node:crypto';

/** One key's health, for logs and (later) metrics. */
export interface KeyRingHealth {
  total: number;
  healthy: number;
  /** Rate-limited (429): out of rotation until their Retry-After passes. */
  cooling: number;
  /** Refused (401/403, exhausted quota): out of rotation for the life of the process. */
  revoked: number;
  /** Each key by its short hash (never the key), in configuration order. */
  list: Array<{ id: string; state: 'healthy' | 'cooling' | 'revoked' }>;
}

/**
 * A provider's API keys, rotated round-robin over the healthy ones. Health is process-wide
 * (every call shares it), so one call's lesson spares the others:
 * - `revoke` (401/403, `insufficient_quota`) takes a key out of rotation for good;
 * - `cool` (429) takes it out until its Retry-After has passed.
 *
 * A provider configured without keys has one keyless entry (no Authorization header), so a
 * keyless provider that answers 401 is refused the same way.
 *
 * A key is never logged: `idOf` gives a short sha256 prefix that identifies it in logs
 * without revealing it.
 */
export class KeyRing {
  private next = 0;
  private readonly entries: ReadonlyArray<string | undefined>;
  private readonly ids: string[];
  private readonly coolUntil: number[];
  private readonly revoked: boolean[];

  constructor(keys: readonly string[]) {
    this.entries = keys.length > 0 ? [...keys] : [undefined];
    this.ids = this.entries.map((key) => (key === undefined ? 'none' : createHash('sha256').update(key).digest('hex').slice(0, 8)));
    this.coolUntil = this.entries.map(() => 0);
    this.revoked = this.entries.map(() => false);
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
   * key is revoked; `except` leaves one key out (the one that just failed).
   */
  readyAt(now: number, except?: number): number | undefined {
    let earliest: number | undefined;
    for (let index = 0; index < this.entries.length; index += 1) {
      if (this.revoked[index] || index === except) continue;
      const at = Math.max(now, this.coolUntil[index] ?? 0);
      if (earliest === undefined || at < earliest) earliest = at;
    }
    return earliest;
  }

  /** Out of rotation for good; true the first time (so the caller logs it once). */
  revoke(index: number): boolean {
    if (this.revoked[index] !== false) return false;
    this.revoked[index] = true;
    return true;
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
    if (this.revoked[index]) return 'revoked';
    return (this.coolUntil[index] ?? 0) > now ? 'cooling' : 'healthy';
  }

  private usable(index: number, now: number): boolean {
    return this.revoked[index] === false && (this.coolUntil[index] ?? 0) <= now;
  }
}
