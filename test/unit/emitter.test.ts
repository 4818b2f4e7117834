import { describe, expect, it } from 'vitest';
import mqemitter from 'mqemitter';
import { createLocalEmitter } from '../../broker/emitter.js';

type Emitter = ReturnType<typeof mqemitter>;

/**
 * A burst as Aedes sees it under load: replies whose delivery waits on a socket (here a
 * setImmediate), then requests nobody subscribes to, all emitted at once.
 */
async function burst(mq: Emitter, replies: number, requests: number): Promise<{ done: number; error: unknown }> {
  let done = 0;
  let error: unknown;
  mq.on('devices/+/result', (_message, release) =>
    setImmediate(() => {
      try {
        release();
      } catch (err) {
        error ??= err;
      }
    }),
  );
  await new Promise<void>((resolve) => {
    const finished = (): void => {
      done += 1;
      if (done === replies + requests) resolve();
    };
    try {
      for (let i = 0; i < replies; i += 1) mq.emit({ topic: 'devices/d/result', payload: i }, finished);
      for (let i = 0; i < requests; i += 1) mq.emit({ topic: 'devices/d/infer/normal', payload: i }, finished);
    } catch (err) {
      error = err;
      resolve();
    }
    setTimeout(resolve, 2000).unref();
  });
  return { done, error };
}

describe('the broker emitter', () => {
  it('delivers a 30 000-message burst without queueing itself to death', async () => {
    const result = await burst(createLocalEmitter(), 200, 30_000);
    expect(result.error).toBeUndefined();
    expect(result.done).toBe(30_200);
  });

  it("Aedes' default (concurrency 100) is what fails on the same burst", async () => {
    const result = await burst(mqemitter({ concurrency: 100, matchEmptyLevels: true }), 200, 30_000);
    expect(result.error).toBeInstanceOf(RangeError);
    expect(result.done).toBeLessThan(30_200);
  });
});
