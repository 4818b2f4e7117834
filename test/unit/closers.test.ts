// The composition root's closers: last opened first, failures logged and the rest still run,
// and a stop that ends even when a part never finishes closing (Redis out of reach).
import { describe, expect, it } from 'vitest';
import { CloseDeadlineError, Closers } from '../../bridge/closers.js';
import { createLogger } from '../../bridge/logger.js';
import { logSink } from '../helpers/log-sink.js';

describe('Closers', () => {
  it('closes last opened first; a failure is logged, the rest still close, and it is thrown at the end', async () => {
    const { stream, lines } = logSink();
    const closers = new Closers(createLogger('info', stream));
    const closed: string[] = [];
    closers.push('first', () => void closed.push('first'));
    closers.push('broken', () => Promise.reject(new Error('boom')));
    closers.push('last', async () => void closed.push('last'));
    await expect(closers.closeAll()).rejects.toThrow('boom');
    expect(closed).toEqual(['last', 'first']);
    expect(
      lines()
        .filter((l) => l.msg === 'could not close')
        .map((l) => l.part),
    ).toEqual(['broken']);
  });

  it('gives up on a part still closing at the deadline, and on the parts after it, naming them', async () => {
    const { stream, lines } = logSink();
    const closers = new Closers(createLogger('info', stream));
    const closed: string[] = [];
    closers.push('redis', () => void closed.push('redis'));
    closers.push('presence', () => new Promise<void>(() => undefined)); // never settles
    closers.push('intake', () => void closed.push('intake'));
    const err = await closers.closeAll(50).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CloseDeadlineError);
    expect((err as CloseDeadlineError).parts).toEqual(['presence', 'redis']);
    expect(closed).toEqual(['intake']);
    expect(lines().filter((l) => l.level === 50)).toEqual([
      expect.objectContaining({ part: 'presence', skipped: ['redis'], msg: 'stop deadline passed: the parts still closing are left as they are' }),
    ]);
  });
});
