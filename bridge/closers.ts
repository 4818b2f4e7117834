// The composition root's stop: every part opened pushes its closer, and stop (or a start that
// failed half-way) runs them last-opened first, so nothing closes under a part still using it.
import type { Logger } from './logger.js';

interface Closer {
  part: string;
  close(): Promise<void> | void;
}

export class Closers {
  private readonly stack: Closer[] = [];

  constructor(private readonly logger: Logger) {}

  push(part: string, close: () => Promise<void> | void): void {
    this.stack.push({ part, close });
  }

  /** Runs every closer in reverse; one that fails is logged, the rest still run, and the first failure is thrown at the end. */
  async closeAll(): Promise<void> {
    let failure: unknown;
    for (let closer = this.stack.pop(); closer; closer = this.stack.pop()) {
      try {
        await closer.close();
      } catch (err) {
        this.logger.warn({ err, part: closer.part }, 'could not close');
        failure ??= err;
      }
    }
    if (failure !== undefined) throw failure;
  }
}
