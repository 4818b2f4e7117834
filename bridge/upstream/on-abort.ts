// Many waits on one AbortSignal, one listener: see onAbort.

/** What runs when a signal aborts, per signal: each signal gets one real listener. */
const handlers = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Runs `handler` once `signal` aborts (not if it already has: check first), until offAbort.
 * Every call in flight shares the scheduler's signal, so each attempt adding and removing an
 * EventTarget listener would cost more than the rest of its bookkeeping (and scan a list as
 * long as the calls in flight): here they share one listener and come and go in a Set.
 */
export function onAbort(signal: AbortSignal, handler: () => void): void {
  let waiting = handlers.get(signal);
  if (!waiting) {
    const set = new Set<() => void>();
    signal.addEventListener(
      'abort',
      () => {
        for (const run of set) {
          try {
            run();
          } catch (err) {
            // As an EventTarget does with a listener that throws: the others still run.
            process.nextTick(() => {
              throw err;
            });
          }
        }
        set.clear();
      },
      { once: true },
    );
    handlers.set(signal, set);
    waiting = set;
  }
  waiting.add(handler);
}

export function offAbort(signal: AbortSignal, handler: () => void): void {
  handlers.get(signal)?.delete(handler);
}
