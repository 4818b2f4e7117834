import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { errorFields, RepeatingLog } from '../../bridge/repeating-log.js';

type Line = Record<string, unknown> & { level: number; msg: string };

function setup(intervalMs = 60_000): { log: RepeatingLog; lines: Line[]; clock: { t: number } } {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(text) as Line);
      done();
    },
  });
  const clock = { t: 1_000_000 };
  const messages = { started: 'Redis unavailable', repeating: 'Redis still unavailable', ended: 'Redis available again' };
  const log = new RepeatingLog(createLogger('info', sink), messages, { intervalMs, now: () => clock.t });
  return { log, lines, clock };
}

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6390'), { code: 'ECONNREFUSED' });

describe('repeating log', () => {
  it('logs the start with the error message and no stack, then nothing within the interval', () => {
    const { log, lines, clock } = setup();
    for (let i = 0; i < 100; i++) {
      log.fail('store', refused());
      clock.t += 500;
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, msg: 'Redis unavailable', source: 'store', err: 'connect ECONNREFUSED 127.0.0.1:6390', code: 'ECONNREFUSED' });
    expect(JSON.stringify(lines[0])).not.toContain('stack');
  });

  it('logs at most once per interval with the repeats since the last line, and the end with duration and total', () => {
    const { log, lines, clock } = setup(60_000);
    log.fail('store', refused());
    for (let i = 0; i < 300; i++) {
      clock.t += 500;
      log.fail(i % 2 ? 'store' : 'claim', refused());
    }
    // 150 s of repeats: a line at 60 s and one at 120 s.
    const repeats = lines.filter((l) => l.msg === 'Redis still unavailable');
    expect(repeats.map((l) => l.repeats)).toEqual([120, 120]);
    expect(repeats.map((l) => l.forMs)).toEqual([60_000, 120_000]);
    log.ok('store');
    expect(lines.at(-1)?.msg).toBe('Redis still unavailable'); // claim still fails
    clock.t += 1000;
    log.ok('claim');
    expect(lines.at(-1)).toMatchObject({ level: 30, msg: 'Redis available again', forMs: 151_000, count: 301 });
    expect(lines).toHaveLength(4);
  });

  it('starts again after it ended, and ignores ok from a source that never failed', () => {
    const { log, lines, clock } = setup();
    log.ok('store');
    expect(lines).toHaveLength(0);
    log.fail('store', refused());
    log.ok('store');
    clock.t += 10;
    log.fail('store', refused());
    expect(lines.map((l) => l.msg)).toEqual(['Redis unavailable', 'Redis available again', 'Redis unavailable']);
    expect(log.active).toBe(true);
  });

  it('logs nothing once silenced (closing)', () => {
    const { log, lines } = setup();
    log.fail('store', refused());
    log.silence();
    log.fail('store', refused());
    log.ok('store');
    expect(lines).toHaveLength(1);
  });

  it('keeps the stack of an unexpected error', () => {
    const fields = errorFields(new TypeError('x is undefined'));
    expect(fields.err).toBeInstanceOf(TypeError);
    expect(errorFields(Object.assign(new Error('Redis is not answering'), { code: 'unavailable' }))).toEqual({
      err: 'Redis is not answering',
      code: 'unavailable',
    });
    expect(errorFields(new Error('Connection is closed.'))).toEqual({ err: 'Connection is closed.' });
  });
});
