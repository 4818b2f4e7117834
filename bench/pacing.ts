// Sending at a fixed rate from a timer, as the benches that time single requests do: request
// i is due at start + i / rate, and a late tick catches up rather than shifting the schedule;
// then waiting, bounded, for the last answers.
import { setTimeout as sleep } from 'node:timers/promises';

const TICK_MS = 10;

/** Calls send(i, recorded) rate × (warmupS + seconds) times; the first rate × warmupS are not recorded. */
export async function paced(rate: number, warmupS: number, seconds: number, send: (i: number, recorded: boolean) => void): Promise<void> {
  const total = Math.round(rate * (warmupS + seconds));
  const warmup = rate * warmupS;
  const start = performance.now();
  let n = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate));
      for (; n < due; n += 1) send(n, n >= warmup);
      if (n < total) return;
      clearInterval(timer);
      resolve();
    }, TICK_MS);
  });
}

/** Waits until every sample is answered (`done` set) or `waitMs` have passed. */
export async function drain(samples: Array<{ done?: number | undefined }>, waitMs: number): Promise<void> {
  const deadline = performance.now() + waitMs;
  while (performance.now() < deadline && samples.some((s) => s.done === undefined)) await sleep(50);
}
