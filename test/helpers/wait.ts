// The one polling loop of the tests: wait for something a device, broker or store will do.
import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `check` every `everyMs` until it is true or `timeoutMs` passed; returns the last result. */
export async function waitUntil(check: () => boolean, timeoutMs: number, everyMs = 10): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (check()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(everyMs);
  }
}

/** Waits like waitUntil, and fails naming `what` if it never became true. */
export async function eventually(what: string, check: () => boolean, timeoutMs = 5000): Promise<void> {
  if (!(await waitUntil(check, timeoutMs))) throw new Error(`timed out waiting for ${what}`);
}
