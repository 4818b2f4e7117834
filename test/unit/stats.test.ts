import { describe, expect, it } from 'vitest';
import {
  buildReport,
  emptyTally,
  formatMix,
  parseMix,
  percentile,
  pickPriority,
  recordFailure,
  recordLost,
  recordFirstChunk,
  recordReply,
  recordSent,
  summarizeLatencies,
  type ReportConfig,
} from '../../device-sim/stats.js';
import { formatTable } from '../../device-sim/summary.js';
import { parseFleetArgs } from '../../device-sim/fleet.js';
import { UsageError } from '../../contract/index.js';

const config: ReportConfig = {
  url: 'mqtt://127.0.0.1:1883',
  devices: 2,
  rate: 10,
  durationS: 1,
  mix: { critical: 1, high: 9, normal: 80, low: 10 },
  qos: 1,
  replyTimeoutMs: 1000,
  prefix: 'sim',
  workers: 0,
};

describe('percentile (nearest rank)', () => {
  const values = Array.from({ length: 100 }, (_, i) => i + 1);

  it('picks observed values by rank ceil(p·n)', () => {
    expect(percentile(values, 50)).toBe(50);
    expect(percentile(values, 95)).toBe(95);
    expect(percentile(values, 99)).toBe(99);
    expect(percentile(values, 100)).toBe(100);
    expect(percentile([15, 20, 35, 40, 50], 30)).toBe(20);
    expect(percentile([15, 20, 35, 40, 50], 40)).toBe(20);
    expect(percentile([15, 20, 35, 40, 50], 50)).toBe(35);
  });

  it('handles a single value and rejects empty input or bad p', () => {
    expect(percentile([7], 1)).toBe(7);
    expect(percentile([7], 99)).toBe(7);
    expect(() => percentile([], 50)).toThrow(RangeError);
    expect(() => percentile([1], 0)).toThrow(RangeError);
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });

  it('summarizes unsorted latencies, null when there are none', () => {
    expect(summarizeLatencies([])).toBeNull();
    expect(summarizeLatencies([30, 10, 20, 40])).toEqual({ p50: 20, p95: 40, p99: 40, max: 40 });
  });
});

describe('parseMix', () => {
  it('parses weights and leaves omitted priorities at 0', () => {
    expect(parseMix('critical=1,high=9,normal=80,low=10')).toEqual({ critical: 1, high: 9, normal: 80, low: 10 });
    expect(parseMix(' normal = 2.5 ')).toEqual({ critical: 0, high: 0, normal: 2.5, low: 0 });
  });

  it.each([
    ['urgent=1', /unknown priority "urgent"/],
    ['high', /not priority=weight/],
    ['high=-1', /non-negative/],
    ['high=x', /non-negative/],
    ['high=', /non-negative/],
    ['high=1,high=2', /twice/],
    ['high=1,', /empty entry/],
    ['high=0,low=0', /at least one/],
  ])('rejects %s', (text, message) => {
    expect(() => parseMix(text)).toThrow(message);
  });

  it('formats back, skipping zero weights', () => {
    expect(formatMix(parseMix('low=10,critical=1'))).toBe('critical=1,low=10');
  });

  it('picks priorities in proportion to weight', () => {
    const mix = parseMix('critical=1,high=1,normal=2,low=0');
    expect(pickPriority(mix, () => 0)).toBe('critical');
    expect(pickPriority(mix, () => 0.25)).toBe('high');
    expect(pickPriority(mix, () => 0.5)).toBe('normal');
    expect(pickPriority(mix, () => 0.9999999999)).toBe('normal');
  });
});

describe('report', () => {
  it('aggregates per priority and overall', () => {
    const tally = emptyTally();
    for (let i = 0; i < 4; i++) recordSent(tally, 'high');
    recordSent(tally, 'low');
    recordSent(tally, 'low');
    recordReply(tally, 'high', { ok: true }, 10);
    recordReply(tally, 'high', { ok: true }, 30);
    recordReply(tally, 'high', { ok: false, code: 'rate_limited' }, 20);
    recordLost(tally, 'high');
    recordReply(tally, 'low', { ok: false, code: 'queue_full' }, 5);
    recordFailure(tally, 'low', 'publish_failed');

    const report = buildReport(tally, 2, config);
    expect(report.durationS).toBe(2);
    expect(report.config).toEqual(config);
    expect(report.byPriority.high).toEqual({
      sent: 4,
      ok: 2,
      errors: { rate_limited: 1 },
      lost: 1,
      expired: 0,
      late: 0,
      latencyMs: { p50: 20, p95: 30, p99: 30, max: 30 },
      achievedRate: 1.5,
    });
    expect(report.byPriority.critical).toEqual({ sent: 0, ok: 0, errors: {}, lost: 0, expired: 0, late: 0, latencyMs: null, achievedRate: 0 });
    expect(report.overall.sent).toBe(6);
    expect(report.overall.ok).toBe(2);
    expect(report.overall.lost).toBe(1);
    expect(report.overall.errors).toEqual({ publish_failed: 1, queue_full: 1, rate_limited: 1 });
    expect(report.overall.latencyMs).toEqual({ p50: 10, p95: 30, p99: 30, max: 30 });
    expect(report.overall.achievedRate).toBe(2);
    // The report is plain data: what --json prints round-trips unchanged.
    expect(JSON.parse(JSON.stringify(report))).toEqual(report);
  });

  it('formats an aligned table with one line per priority and an overall line', () => {
    const tally = emptyTally();
    recordSent(tally, 'normal');
    recordSent(tally, 'normal');
    recordReply(tally, 'normal', { ok: true }, 12.345);
    recordReply(tally, 'normal', { ok: false, code: 'expired' }, 250);
    const lines = formatTable(buildReport(tally, 1, config)).split('\n');

    expect(lines[0]).toContain('2 devices, 10 req/s for 1 s, qos 1, mix critical=1,high=9,normal=80,low=10');
    expect(lines[1]).toMatch(/^priority\s+sent\s+ok\s+errors\s+lost\s+p50 ms\s+p95 ms\s+p99 ms\s+max ms\s+rate\/s$/);
    const names = lines
      .filter((l) => /^\w/.test(l))
      .slice(2)
      .map((l) => l.split(/\s+/)[0]);
    expect(names).toEqual(['critical', 'high', 'normal', 'low', 'overall']);
    const normal = lines.find((l) => l.startsWith('normal')) ?? '';
    expect(normal.split(/\s+/)).toEqual(['normal', '2', '1', 'expired=1', '0', '12.3', '250', '250', '250', '2.0']);
    const critical = lines.find((l) => l.startsWith('critical')) ?? '';
    expect(critical.split(/\s+/)).toEqual(['critical', '0', '0', '-', '0', '-', '-', '-', '-', '0.0']);
    // Columns line up: every data line is as long as the header once padded.
    const headerCols = (lines[1] ?? '').indexOf('sent') + 'sent'.length;
    for (const l of lines.slice(3)) if (/^\w/.test(l)) expect(l.slice(0, headerCols)).toMatch(/\d$/);
  });
});

describe('ttl_ms: expired and late replies', () => {
  it('counts a reply late only past ttl_ms + 100 ms from the publish, ok or not, and expired ones apart', () => {
    const tally = emptyTally();
    for (let i = 0; i < 5; i++) recordSent(tally, 'low');
    recordReply(tally, 'low', { ok: true }, 2100, 2000); // at the deadline + 100 ms: on time
    recordReply(tally, 'low', { ok: true }, 2100.5, 2000);
    recordReply(tally, 'low', { ok: false, code: 'expired' }, 2050, 2000);
    recordReply(tally, 'low', { ok: false, code: 'expired' }, 2500, 2000);
    recordReply(tally, 'low', { ok: true }, 9000); // no ttl_ms: never late
    const report = buildReport(tally, 1, { ...config, ttlMs: 2000 });
    expect(report.byPriority.low).toMatchObject({ ok: 3, errors: { expired: 2 }, expired: 2, late: 2 });
    expect(report.overall).toMatchObject({ expired: 2, late: 2 });
    expect(report.byPriority.high).toMatchObject({ expired: 0, late: 0 });
  });

  it('shows expired and late columns, and the ttl in the title, only when requests carried one', () => {
    const tally = emptyTally();
    recordSent(tally, 'normal');
    recordReply(tally, 'normal', { ok: false, code: 'expired' }, 2300, 2000);
    const lines = formatTable(buildReport(tally, 1, { ...config, ttlMs: 2000 })).split('\n');
    expect(lines[0]).toContain('ttl_ms 2000 (late: over 100 ms past it)');
    expect(lines[1]).toMatch(/^priority\s+sent\s+ok\s+errors\s+lost\s+expired\s+late\s+p50 ms/);
    const normal = (lines.find((l) => l.startsWith('normal')) ?? '').split(/\s+/);
    expect(normal.slice(0, 7)).toEqual(['normal', '1', '0', 'expired=1', '0', '1', '1']);
    expect(formatTable(buildReport(tally, 1, config))).not.toMatch(/late|ttl_ms/);
  });

  it('shows first-chunk columns and says so in the title only when requests were streamed', () => {
    const tally = emptyTally();
    recordSent(tally, 'high');
    recordSent(tally, 'high');
    recordReply(tally, 'high', { ok: true }, 120);
    recordReply(tally, 'high', { ok: true }, 130);
    recordFirstChunk(tally, 'high', 31.5);
    const report = buildReport(tally, 1, { ...config, stream: true });
    expect(report.byPriority.high.firstChunkMs).toMatchObject({ p50: 31.5, p99: 31.5 });
    expect(report.byPriority.low.firstChunkMs).toBeNull();
    const lines = formatTable(report).split('\n');
    expect(lines[0]).toContain('streamed (chunk: publish to first text)');
    expect(lines[1]).toMatch(/max ms\s+chunk p50\s+chunk p99\s+rate\/s$/);
    expect((lines.find((l) => l.startsWith('high')) ?? '').split(/\s+/).slice(-3)).toEqual(['31.5', '31.5', '2.0']);
    expect(formatTable(buildReport(tally, 1, config))).not.toMatch(/chunk/);
    expect(buildReport(tally, 1, config).overall.firstChunkMs).toBeUndefined();
  });

  it('reads --stream as a flag, refused with --images and with --workers', () => {
    expect(parseFleetArgs(['--stream']).stream).toBe(true);
    expect(parseFleetArgs([]).stream).toBeUndefined();
    expect(() => parseFleetArgs(['--stream', '--images', 'generated', '--template', 't'])).toThrow(/^--stream: a raw image/);
    expect(() => parseFleetArgs(['--stream', '--workers', '2'])).toThrow(/^--workers: the fast fleet reads no streams/);
  });

  it('reads --ttl-ms as a positive integer of milliseconds', () => {
    expect(parseFleetArgs(['--ttl-ms', '2000']).ttlMs).toBe(2000);
    expect(parseFleetArgs([]).ttlMs).toBeUndefined();
    for (const bad of ['0', '1.5', 'soon']) expect(() => parseFleetArgs(['--ttl-ms', bad])).toThrow(/^--ttl-ms:/);
  });
});

describe('parseFleetArgs', () => {
  it('applies defaults and converts --reply-timeout to ms', () => {
    const args = parseFleetArgs(['--devices', '3', '--rate', '7.5', '--reply-timeout', '2.5', '--json']);
    expect(args).toMatchObject({
      url: 'mqtt://127.0.0.1:1883',
      devices: 3,
      rate: 7.5,
      durationS: 10,
      qos: 1,
      replyTimeoutMs: 2500,
      prefix: 'sim',
      json: true,
      mix: { critical: 1, high: 9, normal: 80, low: 10 },
    });
    expect(args.username).toBeUndefined();
  });

  it.each([
    [['--devices', '0'], /^--devices:/],
    [['--devices', '1.5'], /^--devices:/],
    [['--rate', 'fast'], /^--rate: not a number/],
    [['--rate=-1'], /^--rate:/],
    [['--rate', '-1'], /'--rate' argument is ambiguous/],
    [['--duration', '0'], /^--duration:/],
    [['--qos', '3'], /^--qos:/],
    [['--mix', 'urgent=1'], /^--mix: unknown priority/],
    [['--url', 'http://x'], /^--url:/],
    [['--url', 'nope'], /^--url:/],
    [['--prefix', 'a/b'], /^--prefix:/],
    [['--reply-timeout=-1'], /^--reply-timeout:/],
    [['--password', 'p'], /^--password:/],
    [['--frobnicate'], /frobnicate/],
    [['stray'], /stray/],
  ])('rejects %j with a message naming the option', (argv, message) => {
    expect(() => parseFleetArgs(argv)).toThrow(UsageError);
    expect(() => parseFleetArgs(argv)).toThrow(message);
    expect(() => parseFleetArgs(argv)).not.toThrow(/\n/);
  });
});
