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

/** Reads `read` every `everyMs` until `done` holds for its value or `timeoutMs` passed; returns the last value read. */
export async function readUntil<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5000, everyMs = 10): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() >= deadline) return value;
    await sleep(everyMs);
  }
}

/**
 * Waits `ms` during which something must NOT happen, for the few checks that have no barrier (no
 * later event that is sure to come after what they fear). Say at the call what would show up by then.
 */
export const quietFor = (ms: number): Promise<void> => sleep(ms);
