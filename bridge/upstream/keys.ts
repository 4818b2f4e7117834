import { createHash } from 'node:crypto';

/**
 * API keys rotated round-robin across calls. A key is never logged: `idOf` gives a short
 * sha256 prefix that identifies it in logs without revealing it.
 */
export class KeyRing {
  private next = 0;
  private readonly ids: string[];

  constructor(private readonly keys: readonly string[]) {
    this.ids = keys.map((key) => createHash('sha256').update(key).digest('hex').slice(0, 8));
  }

  get size(): number {
    return this.keys.length;
  }

  /** The key index a new call starts with; undefined when no keys are configured. */
  start(): number | undefined {
    if (this.keys.length === 0) return undefined;
    const index = this.next % this.keys.length;
    this.next = (this.next + 1) % this.keys.length;
    return index;
  }

  /** The next key after `index` that is not in `exclude`; undefined when none is left. */
  after(index: number | undefined, exclude: ReadonlySet<number>): number | undefined {
    if (index === undefined) return undefined;
    for (let step = 1; step <= this.keys.length; step += 1) {
      const candidate = (index + step) % this.keys.length;
      if (!exclude.has(candidate)) return candidate;
    }
    return undefined;
  }

  key(index: number | undefined): string | undefined {
    return index === undefined ? undefined : this.keys[index];
  }

  idOf(index: number | undefined): string | undefined {
    return index === undefined ? undefined : this.ids[index];
  }
}
