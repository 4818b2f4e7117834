// The attackers' thread: generating and sending hostile input takes CPU, and on this thread
// it never delays the innocent device's timing on the main one.
import { parentPort, workerData } from 'node:worker_threads';
import { Attacker, type KindStats } from './attacker.js';
import type { Kind } from './inputs/actions.js';
import { ActionStream, type InputContext } from './inputs/index.js';

export interface WorkerInit {
  port: number;
  seed: number;
  attackers: number;
  /** Inputs per second per attacker. */
  rate: number;
  kinds: Kind[];
  context: Omit<InputContext, 'self'>;
}

export type StatsByKind = Partial<Record<Kind, KindStats>>;
export type WorkerReport = { type: 'stats'; stats: StatsByKind; replies: Record<string, number>; final: boolean };

/** Attacker n's device id. */
export const attackerId = (n: number): string => `atk${n}`;

function merged(attackers: Attacker[]): StatsByKind {
  const out: StatsByKind = {};
  for (const attacker of attackers) {
    for (const [kind, s] of attacker.stats) {
      const into = (out[kind] ??= { iterations: 0, unencodable: 0, cutOff: 0, noAck: 0, refused: 0 });
      for (const field of Object.keys(s) as Array<keyof KindStats>) into[field] += s[field];
    }
  }
  return out;
}

async function main(init: WorkerInit): Promise<void> {
  const attackers = Array.from({ length: init.attackers }, (_, n) => {
    const ctx: InputContext = { ...init.context, self: attackerId(n) };
    return new Attacker(init.port, ctx, new ActionStream(ctx, init.seed + n, init.kinds), 1000 / init.rate);
  });
  const runs = attackers.map((a) => a.run());
  const replies = (): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const a of attackers) for (const [code, n] of Object.entries(a.replies)) out[code] = (out[code] ?? 0) + n;
    return out;
  };
  const report = (final: boolean): void =>
    parentPort?.postMessage({ type: 'stats', stats: merged(attackers), replies: replies(), final } satisfies WorkerReport);
  const timer = setInterval(() => report(false), 2000);
  parentPort?.on('message', (message: unknown) => {
    if (message !== 'stop') return;
    clearInterval(timer);
    void Promise.all(attackers.map((a) => a.stop()))
      .then(() => Promise.allSettled(runs))
      .then(() => {
        report(true);
        parentPort?.close();
      });
  });
}

await main(workerData as WorkerInit);
