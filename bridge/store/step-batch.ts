// The steps started in one event-loop turn go to Redis as one call (lua-library.ts `many`):
// Redis pays one read, one write and one function entry for all of them, most of what a small
// step costs it, where auto-pipelining alone still made each its own call. A step waits at
// most for the rest of the turn: the batch leaves once the turn's I/O callbacks have run.
import type { Redis } from 'ioredis';
import { StepFailed, type LuaLibrary, type StepCall } from './lua-library.js';

/** Most steps, and about most bytes of arguments, in one call: one call never holds Redis for long. */
const MAX_STEPS = 256;
const MAX_BYTES = 1 << 20;

interface Waiting {
  call: StepCall;
  resolve(result: unknown): void;
  reject(err: unknown): void;
}

export class StepBatch {
  private waiting: Waiting[] = [];
  private bytes = 0;
  private scheduled: NodeJS.Immediate | undefined;

  constructor(
    private readonly library: LuaLibrary,
    private readonly redis: Redis,
  ) {}

  /** The step's own result; a StepFailed when it failed alone; the call's error when the whole call failed. */
  run(call: StepCall): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ call, resolve, reject });
      for (const arg of call.args) this.bytes += typeof arg === 'string' ? arg.length : 8;
      if (this.waiting.length >= MAX_STEPS || this.bytes >= MAX_BYTES) this.flush();
      else this.scheduled ??= setImmediate(() => this.flush());
    });
  }

  /** Sends the steps waiting now. */
  flush(): void {
    clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const batch = this.waiting;
    this.waiting = [];
    this.bytes = 0;
    if (batch.length === 1) {
      const [{ call, resolve, reject }] = batch as [Waiting];
      this.library.call(this.redis, call.name, call.keys, call.args).then(resolve, reject);
    } else if (batch.length > 1) {
      this.library
        .many(
          this.redis,
          batch.map((w) => w.call),
        )
        .then(
          (results) => batch.forEach((w, i) => (results[i] instanceof StepFailed ? w.reject(results[i]) : w.resolve(results[i]))),
          (err: unknown) => batch.forEach((w) => w.reject(err)),
        );
    }
  }
}
