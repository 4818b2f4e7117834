// The composition root's stop: every part opened pushes its closer, and stop (or a start that
// failed half-way) runs them last-opened first, so nothing closes under a part still using it.
import type { Logger } from './logger.js';

interface Closer {
  part: string;
  close(): Promise<void> | void;
}

/** A part that had not closed when the stop's deadline came. */
export class CloseDeadlineError extends Error {
  constructor(readonly parts: string[]) {
    super(`did not close before the deadline: ${parts.join(', ')}`);
  }
}

export class Closers {
  private readonly stack: Closer[] = [];

  constructor(private readonly logger: Logger) {}

  push(part: string, close: () => Promise<void> | void): void {
    this.stack.push({ part, close });
  }

  /**
   * Runs every closer in reverse; one that fails is logged, the rest still run, and the first
   * failure is thrown at the end. With `deadlineMs`, a part still closing then (a connection
   * waiting for an unreachable Redis) is given up on with the parts after it, so a stop ends.
   */
  async closeAll(deadlineMs = Infinity): Promise<void> {
    const until = Date.now() + deadlineMs;
    let failure: unknown;
    for (let closer = this.stack.pop(); closer; closer = this.stack.pop()) {
      this.logger.debug({ part: closer.part }, 'closing');
      try {
        await within(closer, until);
      } catch (err) {
        if (err instanceof CloseDeadlineError) return this.giveUp(closer.part);
        this.logger.warn({ err, part: closer.part }, 'could not close');
        failure ??= err;
      }
    }
    if (failure !== undefined) throw failure;
  }

  private giveUp(part: string): never {
    const skipped = this.stack
      .splice(0)
      .reverse()
      .map((c) => c.part);
    this.logger.error({ part, skipped }, 'stop deadline passed: the parts still closing are left as they are');
    throw new CloseDeadlineError([part, ...skipped]);
  }
}

function within(closer: Closer, until: number): Promise<void> {
  const closing = Promise.resolve().then(() => closer.close());
  if (!Number.isFinite(until)) return closing;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CloseDeadlineError([closer.part])), Math.max(0, until - Date.now()));
  });
  return Promise.race([closing, late]).finally(() => clearTimeout(timer));
}
