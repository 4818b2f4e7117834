// A device over its quota: at most one rate_limited reply per interval, the rest dropped and
// counted, one log line per device per interval with the count, and a bounded, aging map.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { DeviceRefusals } from '../../bridge/intake/refusals.js';

function logged(): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(
        ...chunk
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((l) => String((JSON.parse(l) as { msg: string }).msg)),
      );
      done();
    },
  });
  return { lines, logger: createLogger('info', sink) };
}

const flushed = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('device refusals', () => {
  it('answers one rate_limited refusal a second, drops and counts the rest, and logs a count per interval', async () => {
    const { lines, logger } = logged();
    let dropped = 0;
    const refusals = new DeviceRefusals(logger, () => (dropped += 1), { replyEveryMs: 1000, logEveryMs: 10_000, maxDevices: 100 });
    expect(refusals.refused('cam-1', 0)).toBe(true); // not known to be over: a reply
    refusals.over('cam-1', 30_000, 0);
    expect(refusals.retryAfter('cam-1', 1000)).toBe(29_000);
    const answered = Array.from({ length: 1000 }, (_, i) => refusals.refused('cam-1', i * 12)).filter(Boolean).length;
    expect(answered).toBe(12); // 0 … 11 988 ms: one a second
    expect(dropped).toBe(988);
    expect(refusals.retryAfter('cam-1', 30_000)).toBeUndefined();
    await flushed();
    expect(lines).toEqual([
      'device cam-1 is over DEVICE_RATE_LIMIT_RPM: its refusals are answered at most once a second',
      'device cam-1: 834 requests refused (rate_limited) in the last 10 s',
    ]);
  });

  it('bounds the devices it remembers, forgetting those no longer over and, when full, the oldest', () => {
    const { logger } = logged();
    const refusals = new DeviceRefusals(logger, undefined, { replyEveryMs: 1000, logEveryMs: 10_000, maxDevices: 50 });
    for (let i = 0; i < 500; i += 1) refusals.over(`cam-${i}`, 60_000, i);
    expect(refusals.size).toBeLessThanOrEqual(50);
    refusals.over('late', 1000, 200_000); // an interval later: every earlier one is no longer over
    expect(refusals.size).toBe(1);
  });

  it('bounds the replies to refusals the store could not count', () => {
    const { logger } = logged();
    const refusals = new DeviceRefusals(logger);
    const answered = Array.from({ length: 100 }, (_, i) => refusals.refused('cam-9', i * 10, false)).filter(Boolean).length;
    expect(answered).toBe(1);
    expect(refusals.retryAfter('cam-9', 500)).toBeUndefined(); // not over its quota: its next publish is read
  });

  it('bounds the devices it remembers for refusals the store could not count too', () => {
    const { logger } = logged();
    const refusals = new DeviceRefusals(logger, undefined, { replyEveryMs: 1000, logEveryMs: 10_000, maxDevices: 50 });
    for (let i = 0; i < 500; i += 1) refusals.refused(`cam-${i}`, i, false);
    expect(refusals.size).toBeLessThanOrEqual(50);
  });
});
