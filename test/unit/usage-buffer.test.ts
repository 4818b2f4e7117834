// Usage counted in the instance: one write per hour touched per flush, amounts summed per
// field, and nothing lost when a write fails (kept for the next flush).
import { describe, expect, it } from 'vitest';
import { UsageBuffer } from '../../bridge/store/usage-buffer.js';

const HOUR = 3_600_000;
const record = { deviceId: 'cam-1', model: 'gpt', priority: 'high' as const, promptTokens: 10, completionTokens: 5, costUsd: 0.5 };

describe('UsageBuffer', () => {
  it('sums calls per field and writes each hour once per flush', async () => {
    const writes: Array<[number, Record<string, number>]> = [];
    const buffer = new UsageBuffer(async (hour, amounts) => void writes.push([hour, Object.fromEntries(amounts)]));
    buffer.add(record, 5 * HOUR + 1);
    buffer.add({ ...record, costUsd: 0 }, 5 * HOUR + 2);
    buffer.add(record, 6 * HOUR);
    await buffer.flush();
    expect(writes).toEqual([
      [5 * HOUR, { 'cam-1\tgpt\thigh\tr': 2, 'cam-1\tgpt\thigh\tp': 20, 'cam-1\tgpt\thigh\tc': 10, 'cam-1\tgpt\thigh\tusd': 0.5 }],
      [6 * HOUR, { 'cam-1\tgpt\thigh\tr': 1, 'cam-1\tgpt\thigh\tp': 10, 'cam-1\tgpt\thigh\tc': 5, 'cam-1\tgpt\thigh\tusd': 0.5 }],
    ]);
    await buffer.flush();
    expect(writes).toHaveLength(2); // nothing new, nothing written
  });

  it('keeps what a failed write could not store, and writes it with the next flush', async () => {
    let fail = true;
    const written: Record<string, number>[] = [];
    const buffer = new UsageBuffer(async (_hour, amounts) => {
      if (fail) throw new Error('Redis away');
      written.push(Object.fromEntries(amounts));
    });
    buffer.add(record, HOUR);
    await expect(buffer.flush()).rejects.toThrow('Redis away');
    buffer.add(record, HOUR + 1);
    fail = false;
    await buffer.flush();
    expect(written).toEqual([{ 'cam-1\tgpt\thigh\tr': 2, 'cam-1\tgpt\thigh\tp': 20, 'cam-1\tgpt\thigh\tc': 10, 'cam-1\tgpt\thigh\tusd': 1 }]);
  });

  it('flushes by itself about a second after the first count', async () => {
    const written: number[] = [];
    const buffer = new UsageBuffer(async (hour) => void written.push(hour));
    buffer.add(record, HOUR);
    for (let i = 0; i < 300 && written.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(written).toEqual([HOUR]);
  });
});
