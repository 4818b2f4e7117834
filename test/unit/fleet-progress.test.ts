// device-sim's progress line (live on a terminal, plain lines otherwise) and the hints drawn
// from what the devices saw.
import { describe, expect, it } from 'vitest';
import { emptyDiagnosis, hints, noteDisconnect, notePublishRefused, noteStatus } from '../../device-sim/diagnosis.js';
import { progressLine, startProgress, type LiveCounts } from '../../device-sim/progress.js';
import { eventually } from '../helpers/wait.js';

function counts(over: Partial<LiveCounts> = {}): LiveCounts {
  return { sent: 10, ok: 7, errors: { queue_full: 2 }, inFlight: 1, diagnosis: emptyDiagnosis(true), ...over };
}

describe('the progress line', () => {
  it('shows sent, answered, ok, errors by code, in flight and the rate', () => {
    expect(progressLine(counts({ errors: { rate_limited: 1, queue_full: 2 } }), 3.04, 4.25)).toBe(
      'device-sim: 3.0 s  sent 10  answered 10  ok 7  errors queue_full 2, rate_limited 1  in flight 1  4.3/s',
    );
  });

  it('adds the no-answer hint only once nothing has answered for 5 s; a refusal at once', () => {
    const silent = counts({ ok: 0, errors: {}, inFlight: 10 });
    expect(progressLine(silent, 4.9, 0)).not.toContain('—');
    expect(progressLine(silent, 5, 0)).toMatch(/ {2}— no answer and no bridge status seen on bridge\/\+\/status/);
    const refused = counts();
    notePublishRefused(refused.diagnosis, 'sim-1', 0x87);
    expect(progressLine(refused, 0.5, 0)).toMatch(/— the broker refused publishes: 1 × 0x87 Not authorized \(first: sim-1: PUBACK 0x87 Not authorized\)$/);
  });

  it('on a terminal: rewritten in place, cleared around phase lines and at the end', async () => {
    let out = '';
    const progress = startProgress({ write: (t: string) => (out += t), isTTY: true });
    progress.start(() => counts());
    const rewrites = (): number => out.match(/\r\x1b\[2Kdevice-sim: \d\.\d s {2}sent 10/g)?.length ?? 0;
    await eventually('two rewrites of the line', () => rewrites() >= 2);
    progress.log('sent 10; waiting');
    progress.stop();
    expect(out).not.toMatch(/\/s\n/);
    expect(rewrites()).toBeGreaterThanOrEqual(2);
    expect(out).toMatch(/\r\x1b\[2Kdevice-sim: sent 10; waiting\ndevice-sim: [\d.]+ s {2}sent 10 .*\r\x1b\[2K$/);
  });

  it('otherwise: one plain line per interval, nothing to clear', async () => {
    let out = '';
    const progress = startProgress({ write: (t: string) => (out += t) }, 100);
    progress.start(() => counts());
    const linesOf = (): string[] => out.split('\n').filter((l) => l !== '');
    await eventually('three lines', () => linesOf().length >= 3);
    progress.log('closing');
    progress.stop();
    const lines = linesOf();
    expect(lines.length).toBeGreaterThanOrEqual(3);
    expect(lines.slice(0, -1).every((l) => /^device-sim: \d\.\d s {2}sent 10 {2}answered 9/.test(l))).toBe(true);
    expect(lines.at(-1)).toBe('device-sim: closing');
    expect(out).not.toContain('\r');
  });
});

describe('hints', () => {
  it('answered: only refusals and drops', () => {
    const d = emptyDiagnosis(true);
    expect(hints(d, 3)).toEqual([]);
    noteDisconnect(d, 'sim-2', 'connection closed by the broker');
    expect(hints(d, 3)).toEqual([
      expect.stringMatching(/^the broker closed 1 connection\(s\) during the run \(first: sim-2: connection closed by the broker\)/),
    ]);
  });

  it('nothing answered: what the status topic said', () => {
    const d = emptyDiagnosis(true);
    noteStatus(d, Buffer.from(JSON.stringify({ state: 'offline', instance: 'b1', version: '0.7.0', since: '2026-01-01T00:00:00Z' })));
    expect(hints(d, 0)).toEqual(['no answer; every bridge seen is offline (b1)']);
    noteStatus(d, Buffer.from('not json'));
    noteStatus(d, Buffer.from(JSON.stringify({ state: 'online', instance: 'b2', version: '0.7.0', since: '2026-01-01T00:00:00Z' })));
    expect(hints(d, 0)).toEqual(['no answer although bridge b2 is online: see its log (upstream, budgets, rate limits)']);
    expect(hints({ ...emptyDiagnosis(true), statusRefused: true }, 0)).toEqual([expect.stringMatching(/may not read bridge\/\+\/status/)]);
  });
});
