// The memory store's deadline heap: due keys come out earliest first, at most `limit` at a time.
import { describe, expect, it } from 'vitest';
import { DeadlineIndex } from '../../bridge/store/memory-deadlines.js';

describe('DeadlineIndex', () => {
  it('hands out every key whose deadline has come, earliest first, and keeps the rest', () => {
    const index = new DeadlineIndex();
    const deadlines = Array.from({ length: 500 }, (_, i) => ({ key: `k${i}`, at: (i * 7919) % 1000 }));
    for (const { key, at } of deadlines) index.add(key, at);
    const first = index.due(499, 100);
    expect(first).toHaveLength(100);
    const rest = index.due(499, 10_000);
    const expected = deadlines.filter((d) => d.at <= 499).sort((a, b) => a.at - b.at);
    const got = [...first, ...rest];
    expect(got.map((k) => deadlines.find((d) => d.key === k)?.at)).toEqual(expected.map((d) => d.at));
    expect(index.due(999, 10_000)).toHaveLength(deadlines.length - expected.length);
    expect(index.due(10_000, 10)).toEqual([]);
  });
});
