// Calls that may wait a moment: held for a few milliseconds, then started together in one
// tick, so more of them share one Redis call (step-batch.ts) than the turns they were made in
// would give.
export class Gather {
  private waiting: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly delayMs: number) {}

  run<T>(call: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push(() => void call().then(resolve, reject));
      this.timer ??= setTimeout(() => this.flush(), this.delayMs);
    });
  }

  /** Starts every waiting call now. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const calls = this.waiting;
    this.waiting = [];
    for (const call of calls) call();
  }
}
