// Waiting and checking that a shutdown cuts short: an aborted call fails as `unavailable`.
import { offAbort, onAbort } from './on-abort.js';
import { shuttingDown } from './provider.js';

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw shuttingDown();
}

export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(shuttingDown());
      return;
    }
    const onAborted = (): void => {
      clearTimeout(timer);
      reject(shuttingDown());
    };
    const timer = setTimeout(() => {
      if (signal) offAbort(signal, onAborted);
      resolve();
    }, ms);
    if (signal) onAbort(signal, onAborted);
  });
}
