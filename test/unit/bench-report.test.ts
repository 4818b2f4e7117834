import { describe, expect, it } from 'vitest';
import { formatReport, formatSteps } from '../../bench/report.js';
import type { BenchResults, OverloadResult, StepResult, SystemResult } from '../../bench/results.js';
import { renderLatencyChart } from '../../bench/svg.js';

function step(rate: number, p50: number, p99: number, passed = true): StepResult {
  return {
    rate,
    durationS: 10,
    sent: rate * 10,
    answered: rate * 10,
    ok: rate * 10,
    errors: {},
    lost: 0,
    achievedRate: rate,
    latencyMs: { p50, p95: (p50 + p99) / 2, p99, max: p99 * 2 },
    passed,
    cpu: { bridge: 0.5, generator: 0.25 },
    rssMb: 80,
  };
}

function system(id: SystemResult['id'], label: string, maxRate: number, steps: StepResult[] = []): SystemResult {
  return {
    id,
    label,
    maxRate,
    overheadAt1000Ms: { p50: 1.24, p95: 3.05, p99: 7.5, max: 12 },
    cpuAtMax: { bridge: 0.954, generator: 0.62, upstream: 0.31, redis: 0.2 },
    rssMb: 95.6,
    steps,
  };
}

function results(systems: SystemResult[], extra: Partial<BenchResults> = {}): BenchResults {
  return {
    startedAt: '2026-01-01T00:00:00.000Z',
    command: 'node dist/bench/run.js --quick',
    quick: true,
    machine: { cpus: 2, cpuModel: 'Intel(R) Xeon(R) Processor', memoryGb: 24, node: 'v20.20.2', redis: '7.2.4', os: 'Linux 6.18' },
    upstreamLatencyMs: 50,
    p99LimitMs: 250,
    generator: { workers: 2, connections: 200 },
    systems,
    durationS: 300,
    ...extra,
  };
}

const full = results([
  system('echo', 'echo (generator only)', 30_000, [step(10_000, 2, 5), step(30_000, 4, 40), step(40_000, 30, 900, false)]),
  system('memory', 'bridge, memory store', 8_000, [step(8_000, 55, 120), step(2_000, 52, 60), step(12_000, 80, 400, false)]),
  system('redis', 'bridge, Redis store', 3_000, [step(1_000, 53, 70), step(3_000, 60, 200)]),
]);

/** The cells of the main table's row whose first cell is `label`. */
function row(markdown: string, label: string): string[] {
  const line = markdown.split('\n').find((l) => l.startsWith(`| ${label} |`));
  if (line === undefined) throw new Error(`no row for ${label}`);
  return line
    .slice(2, -2)
    .split(' | ')
    .map((c) => c.trim());
}

describe('formatReport', () => {
  it('heads the report with the machine, upstream latency, p99 limit and run kind', () => {
    const first = formatReport(full).split('\n')[0] ?? '';
    for (const part of ['2 × Intel(R) Xeon(R) Processor', '24 GB', 'v20.20.2', 'Redis 7.2.4', 'upstream 50 ms', 'p99 limit 250 ms', 'quick']) {
      expect(first).toContain(part);
    }
    expect(formatReport(results([], { quick: false })).split('\n')[0]).toContain('full run');
  });

  it('divides each max rate by echo’s, and shows — for echo itself', () => {
    const md = formatReport(full);
    expect(row(md, 'echo (generator only)')).toEqual([
      'echo (generator only)',
      '30 000',
      '—',
      '—',
      '—',
      '1.2',
      '3.0',
      '7.5',
      'bridge 0.95 · generator 0.62 · upstream 0.31 · redis 0.20',
      '96',
    ]);
    expect(row(md, 'bridge, memory store').slice(1, 3)).toEqual(['8 000', '0.27×']);
    expect(row(md, 'bridge, Redis store').slice(1, 3)).toEqual(['3 000', '0.10×']);
  });

  it('divides each max rate by the bare handler’s and the BullMQ-built bridge’s of the same run', () => {
    const md = formatReport(results([system('handler', 'handler', 4_000), system('bullmq', 'bullmq', 2_000), system('redis', 'redis', 3_000)]));
    expect(row(md, 'redis').slice(1, 5)).toEqual(['3 000', '—', '0.75×', '1.50×']);
    expect(row(md, 'bullmq').slice(3, 5)).toEqual(['0.50×', '—']);
    expect(row(md, 'handler').slice(3, 5)).toEqual(['—', '2.00×']);
  });

  it('keeps the systems in the document’s order', () => {
    const md = formatReport(full);
    const order = ['echo (generator only)', 'bridge, memory store', 'bridge, Redis store'].map((l) => md.indexOf(`| ${l} |`));
    expect(order.every((at, i) => at > 0 && (i === 0 || at > (order[i - 1] ?? 0)))).toBe(true);
  });

  it('shows — for every ratio when echo is missing or has a max of 0', () => {
    const noEcho = formatReport(results([system('memory', 'mem', 8_000)]));
    expect(row(noEcho, 'mem')[2]).toBe('—');
    expect(noEcho).toContain('No echo row');
    const zeroEcho = formatReport(results([system('echo', 'echo', 0), system('memory', 'mem', 8_000)]));
    expect(row(zeroEcho, 'mem')[2]).toBe('—');
  });

  it('shows — for a missing overhead and an empty CPU record', () => {
    const s = { ...system('redis', 'redis', 0), overheadAt1000Ms: null, cpuAtMax: {} };
    expect(row(formatReport(results([s])), 'redis').slice(3, 7)).toEqual(['—', '—', '—', '—']);
  });

  it('names the generator’s ceiling after the echo row’s max', () => {
    expect(formatReport(full)).toContain("The echo row's max (30 000 req/s) is also the load generator's ceiling (2 workers, 200 connections)");
  });

  it('escapes a | in a label so the row keeps its columns', () => {
    const md = formatReport(results([system('memory', 'a|b', 10)]));
    expect(md).toContain('| a\\|b |');
  });

  it('has no overload or idle section when neither was measured', () => {
    const md = formatReport(full);
    expect(md).not.toContain('Overload');
    expect(md).not.toContain('Idle connections');
  });

  it('adds an overload table for the systems that have one, a row per setting', () => {
    const none = { expired: 0, late: 0, latencyMs: null };
    const overload: OverloadResult = {
      rate: 20_000,
      durationS: 30,
      queueWaitMs: 1000,
      ttlMs: 2000,
      sent: 600_000,
      ok: 400_000,
      errors: { queue_full: 1234, expired: 12, unused: 0 },
      lost: 3,
      expired: 12,
      late: 7,
      byPriority: { critical: none, high: none, normal: { expired: 12, late: 7, latencyMs: { p50: 900, p99: 3000 } }, low: none },
      rssStartMb: 100,
      rssEndMb: 250,
      latencyMs: { p50: 812.44, p99: 2950 },
      survived: true,
    };
    const { ttlMs: _ttl, queueWaitMs: _wait, ...untuned } = overload;
    const defaults: OverloadResult = { ...untuned, queueWaitMs: 0, late: 0 };
    const memory: SystemResult = { ...system('memory', 'bridge, memory store', 8_000), overload: [overload, defaults] };
    const redis: SystemResult = {
      ...system('redis', 'bridge, Redis store', 3_000),
      overload: [{ ...overload, errors: {}, rssStartMb: 0, survived: false }],
    };
    const shedding: SystemResult = {
      ...system('redis-x2', 'two bridges', 3_000),
      overload: [{ ...overload, errors: { queue_full: 1234, expired: 12 }, shed: { queue_wait: 1200, event_loop: 34, admissions: 0 } }],
    };
    const bullmq: SystemResult = { ...system('bullmq', 'BullMQ', 2_000), overload: [{ ...untuned, ttlMs: 2000 }] };
    const md = formatReport(results([system('echo', 'echo', 30_000), memory, redis, shedding, bullmq]));
    expect(md).toContain('### Overload');
    const overloadPart = md.slice(md.indexOf('### Overload'));
    const rows = overloadPart.split('\n').filter((l) => l.startsWith('| bridge, memory store |'));
    expect(
      rows.map((l) =>
        l
          .slice(2, -2)
          .split(' | ')
          .map((c) => c.trim()),
      ),
    ).toEqual([
      [
        'bridge, memory store',
        'OVERLOAD_QUEUE_WAIT_MS 1 000 · ttl_ms 2 000',
        '20 000',
        '30',
        '600 000',
        '400 000',
        'queue_full 1 234 · expired 12',
        '3',
        '12',
        '7',
        '812.4 / 2 950.0',
        '100 → 250',
        '2.50',
        'yes',
      ],
      // Without a ttl_ms nothing can be late: a dash, not a zero.
      [
        'bridge, memory store',
        'defaults · no ttl_ms',
        '20 000',
        '30',
        '600 000',
        '400 000',
        'queue_full 1 234 · expired 12',
        '3',
        '12',
        '—',
        '812.4 / 2 950.0',
        '100 → 250',
        '2.50',
        'yes',
      ],
    ]);
    expect(row(overloadPart, 'bridge, Redis store').slice(6)).toEqual(['none', '3', '12', '7', '812.4 / 2 950.0', '0 → 250', '—', 'no']);
    // The bridge's own refusals say why, beside the code.
    expect(row(overloadPart, 'two bridges')[6]).toBe('queue_full 1 234 (queue_wait 1 200, event_loop 34) · expired 12');
    // A system without the queue-wait setting names only the ttl.
    expect(row(overloadPart, 'BullMQ')[1]).toBe('ttl_ms 2 000');
    expect(overloadPart).not.toContain('| echo |');
    expect(overloadPart).toContain('Late: answered (ok or not) more than 100 ms after the device published + ttl_ms');
  });

  it('adds the idle table when idle connections were measured', () => {
    const md = formatReport(
      results([], {
        idle: {
          devices: 10_000,
          connected: 9_998,
          dropped: 0,
          rssBeforeMb: 80,
          rssPeakMb: 230.4,
          rssSettledMb: 170.2,
          peakPerConnectionKb: 15.36,
          settledPerConnectionKb: 9.24,
          settleS: 45,
          lightLoad: { rate: 100, latencyMs: { p50: 51.25, p95: 55, p99: 60.04, max: 70 }, lost: 0 },
        },
      }),
    );
    expect(md).toContain('### Idle connections');
    expect(md).toContain('| 10 000 | 9 998 | 0 | 80 | 230 | 170 | 15.4 / 9.2 | 100 | 51.3 | 60.0 | 0 |');
    expect(md).toContain('at most 45 s after the light load');
  });
});

describe('formatSteps', () => {
  it('gives one table per system with every step, sorted by rate', () => {
    const md = formatSteps(full);
    expect(md.match(/^### /gm)).toHaveLength(3);
    const memory = md.slice(md.indexOf('### bridge, memory store'), md.indexOf('### bridge, Redis store'));
    const rates = memory
      .split('\n')
      .filter((l) => /^\| [\d ]+ \|/.test(l))
      .map((l) => l.split(' | ')[0]);
    expect(rates).toEqual(['| 2 000', '| 8 000', '| 12 000']);
    expect(row(memory, '12 000')).toEqual([
      '12 000',
      '12 000',
      '120 000',
      '120 000',
      'none',
      '0',
      '80.0',
      '240.0',
      '400.0',
      '800.0',
      '✗',
      'bridge 0.50 · generator 0.25',
      '80',
    ]);
    expect(row(memory, '8 000')[10]).toBe('✓');
  });

  it('does not reorder the input', () => {
    const copy = structuredClone(full);
    formatSteps(copy);
    expect(copy).toEqual(full);
  });
});

describe('renderLatencyChart', () => {
  const withOdd = results([...full.systems, { ...system('memory', 'a<b & "c"', 0), steps: [step(500, 0.2, 0.4)] }, system('redis', 'no steps', 0)]);

  it('is one svg element', () => {
    const svg = renderLatencyChart(withOdd);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.endsWith('</svg>')).toBe(true);
    expect(svg.match(/<svg/g)).toHaveLength(1);
    expect(svg).toContain('xmlns="http://www.w3.org/2000/svg"');
  });

  it('draws a p99 and a p50 polyline per system', () => {
    const svg = renderLatencyChart(withOdd);
    expect(svg.match(/<polyline[^>]*class="p99"/g)).toHaveLength(5);
    expect(svg.match(/<polyline[^>]*class="p50"/g)).toHaveLength(5);
    expect(svg.match(/<polyline[^>]*class="p50"[^>]*/g)?.every((p) => p.includes('stroke-dasharray'))).toBe(true);
    expect(svg.match(/<polyline[^>]*class="p99"[^>]*/g)?.some((p) => p.includes('stroke-dasharray'))).toBe(false);
  });

  it('escapes labels', () => {
    const svg = renderLatencyChart(withOdd);
    expect(svg).toContain('a&lt;b &amp; &quot;c&quot;');
    expect(svg).not.toContain('a<b');
  });

  it('has no NaN or Infinity in it', () => {
    for (const r of [withOdd, results([]), results([system('echo', 'e', 0, [step(0, 0, 0)])], { p99LimitMs: 0 })]) {
      expect(renderLatencyChart(r)).not.toMatch(/NaN|Infinity/);
    }
    expect(formatReport(withOdd)).not.toMatch(/NaN|Infinity/);
    expect(formatSteps(withOdd)).not.toMatch(/NaN|Infinity/);
  });

  it('puts 100 ms above 10 ms (smaller y) on the log axis, and 1–10 as tall as 10–100', () => {
    const svg = renderLatencyChart(results([system('memory', 'm', 100, [step(100, 10, 100), step(200, 1, 1000)])]));
    const tickY = (label: string): number => {
      const m = new RegExp(`<text x="[\\d.]+" y="([\\d.]+)"[^>]*class="y-tick">${label}</text>`).exec(svg);
      if (m?.[1] === undefined) throw new Error(`no y tick ${label}`);
      return Number(m[1]);
    };
    expect(tickY('100')).toBeLessThan(tickY('10'));
    expect(tickY('1 000')).toBeLessThan(tickY('100'));
    expect(tickY('1') - tickY('10')).toBeCloseTo(tickY('10') - tickY('100'), 0);
    // Markers too: at rate 100, p50 (r=2.5) is 10 ms and p99 (r=3.5) 100 ms, so p50 sits lower.
    const cy = (r: string): number[] => [...svg.matchAll(new RegExp(`cy="([\\d.]+)" r="${r}"`, 'g'))].map((m) => Number(m[1]));
    const [p50Marker] = cy('2.5');
    const [p99Marker] = cy('3.5');
    expect(p50Marker).toBeCloseTo(tickY('10') - 4, 0);
    expect(p99Marker).toBeLessThan(p50Marker ?? 0);
  });

  it('draws failed steps hollow', () => {
    const svg = renderLatencyChart(results([system('memory', 'm', 100, [step(100, 10, 100), step(200, 20, 400, false)])]));
    const dots = [...svg.matchAll(/<circle cx="[\d.]+" cy="[\d.]+" r="3.5" fill="([^"]+)" stroke="([^"]+)"/g)];
    const series = dots.filter((d) => d[2] !== '#333');
    expect(series.map((d) => d[1] === '#fff')).toEqual([false, true]);
  });

  it('labels the p99 limit', () => {
    expect(renderLatencyChart(full)).toContain('p99 limit 250 ms');
  });

  it('draws only axes for an empty systems array', () => {
    const svg = renderLatencyChart(results([]));
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.endsWith('</svg>')).toBe(true);
    expect(svg).not.toContain('<polyline');
    expect(svg).toMatch(/class="x-tick">0</);
  });

  it('gives the same output for the same input', () => {
    expect(renderLatencyChart(full)).toBe(renderLatencyChart(structuredClone(full)));
  });
});
