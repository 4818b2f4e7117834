// The client's retry rule: which refusals are worth the same request again, and after how long.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../contract/index.js';
import { afterRefusal } from '../../client/retry.js';

describe('client retry rule', () => {
  it('retries queue_full, rate_limited and unavailable only', () => {
    const retried = ERROR_CODES.filter((code) => afterRefusal(code, 1, undefined).retry);
    expect(retried.sort()).toEqual(['queue_full', 'rate_limited', 'unavailable']);
  });

  it("waits the bridge's retry_after_ms, stretched by at most a fifth", () => {
    expect(afterRefusal('rate_limited', 1, 4000, () => 0)).toEqual({ retry: true, waitMs: 4000 });
    expect(afterRefusal('rate_limited', 1, 4000, () => 1)).toEqual({ retry: true, waitMs: 4800 });
  });

  it('backs off exponentially without one: half to all of 0.5 s × 2^(attempt-1), at most 30 s', () => {
    const range = (attempt: number) =>
      [afterRefusal('unavailable', attempt, undefined, () => 0), afterRefusal('unavailable', attempt, undefined, () => 1)].map((r) =>
        r.retry ? r.waitMs : NaN,
      );
    expect(range(1)).toEqual([250, 500]);
    expect(range(3)).toEqual([1000, 2000]);
    expect(range(20)).toEqual([15_000, 30_000]);
  });
});
