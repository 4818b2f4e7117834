// Gather: calls held a moment start together in one tick, each with its own result.
import { describe, expect, it } from 'vitest';
import { Gather } from '../../bridge/store/gather.js';

describe('Gather', () => {
  it('starts every call held within the delay in the same tick, and settles each with its own outcome', async () => {
    const gather = new Gather(5);
    const started: number[] = [];
    const tick = { n: 0 };
    const call =
      (n: number, fail = false) =>
      () => {
        started.push(tick.n);
        return fail ? Promise.reject(new Error(`call ${n}`)) : Promise.resolve(n);
      };
    const a = gather.run(call(1));
    const b = gather.run(call(2, true));
    await new Promise((r) => setTimeout(r, 1));
    tick.n = 1;
    const c = gather.run(call(3));
    expect(started).toEqual([]); // nothing before the delay
    await expect(a).resolves.toBe(1);
    await expect(b).rejects.toThrow('call 2');
    await expect(c).resolves.toBe(3);
    expect(started).toEqual([1, 1, 1]);
  });

  it('starts what waits at once on flush', async () => {
    const gather = new Gather(10_000);
    const pending = gather.run(async () => 'now');
    gather.flush();
    await expect(pending).resolves.toBe('now');
  });
});
