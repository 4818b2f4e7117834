import { describe, expect, it } from 'vitest';
import { backoffDelayMs, parseRetryAfterMs } from '../../bridge/upstream/backoff.js';

const opts = { baseMs: 100, maxMs: 1000 };

describe('backoffDelayMs', () => {
  it('grows exponentially up to the cap (upper end of the jitter)', () => {
    const top = (): number => 1;
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelayMs(n, opts, top))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });

  it('uses full jitter: anywhere from 0 to the cap', () => {
    expect(backoffDelayMs(3, opts, () => 0)).toBe(0);
    expect(backoffDelayMs(3, opts, () => 0.5)).toBe(200);
    const draws = Array.from({ length: 1000 }, () => backoffDelayMs(4, opts));
    for (const d of draws) {
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(800);
      expect(Number.isInteger(d)).toBe(true);
    }
    // The draws span the whole range rather than sitting at the cap or at a fixed delay.
    expect(Math.min(...draws)).toBeLessThan(100);
    expect(Math.max(...draws)).toBeGreaterThan(700);
  });

  it('stays finite and capped for huge attempt numbers', () => {
    expect(backoffDelayMs(10_000, opts, () => 1)).toBe(1000);
  });

  it('treats nonsense attempt numbers as the first retry and clamps a bad random source', () => {
    expect(backoffDelayMs(0, opts, () => 1)).toBe(100);
    expect(backoffDelayMs(Number.NaN, opts, () => 1)).toBe(100);
    expect(backoffDelayMs(2, opts, () => 7)).toBe(200);
    expect(backoffDelayMs(2, opts, () => -1)).toBe(0);
  });
});

describe('parseRetryAfterMs', () => {
  const now = Date.UTC(2024, 0, 1, 12, 0, 0);

  it('reads delay-seconds', () => {
    expect(parseRetryAfterMs('1', now)).toBe(1000);
    expect(parseRetryAfterMs('0', now)).toBe(0);
    expect(parseRetryAfterMs(' 2 ', now)).toBe(2000);
    expect(parseRetryAfterMs('1.5', now)).toBe(1500);
  });

  it('clamps negative delays to 0', () => {
    expect(parseRetryAfterMs('-3', now)).toBe(0);
  });

  it('reads an HTTP-date relative to now, and a past one as 0', () => {
    expect(parseRetryAfterMs(new Date(now + 5000).toUTCString(), now)).toBe(5000);
    expect(parseRetryAfterMs(new Date(now - 5000).toUTCString(), now)).toBe(0);
    expect(parseRetryAfterMs('Sunday, 06-Nov-94 08:49:37 GMT', now)).toBe(0);
  });

  it('takes the first of repeated headers', () => {
    expect(parseRetryAfterMs(['2', '5'], now)).toBe(2000);
  });

  it('ignores absent and garbage values', () => {
    expect(parseRetryAfterMs(undefined, now)).toBeUndefined();
    expect(parseRetryAfterMs('', now)).toBeUndefined();
    expect(parseRetryAfterMs('soon', now)).toBeUndefined();
    expect(parseRetryAfterMs('1 2', now)).toBeUndefined();
    expect(parseRetryAfterMs('Mon 1 2', now)).toBeUndefined();
    expect(parseRetryAfterMs('Mon, 99 Foo 2024 12:00:00 GMT', now)).toBeUndefined();
    expect(parseRetryAfterMs([], now)).toBeUndefined();
  });
});
