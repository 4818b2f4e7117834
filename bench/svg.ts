// Draws latency against offered rate as a self-contained SVG: no fonts, scripts or libraries, so
// it renders the same on GitHub, in a browser and in a converter, and the same input always
// gives the same bytes.

import { formatInt, formatShort, stepsByRate } from './report.js';
import type { BenchResults, StepResult, SystemResult } from './results.js';

const WIDTH = 800;
const HEIGHT = 480;
const PLOT = { left: 64, top: 52, right: 600, bottom: 420 };
const LEGEND_X = 624;
const LEGEND_ROW = 38;
const MAX_LABEL_CHARS = 22;
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
// Without data the axes still need a range; this one spans the usual bridge latencies.
const EMPTY_LATENCY_RANGE = [1, 1000];
const EMPTY_RATE_MAX = 1000;

type Percentile = 'p99' | 'p50';

const PERCENTILE_STYLE: Record<Percentile, { width: number; dash: string; radius: number }> = {
  p99: { width: 2, dash: '', radius: 3.5 },
  p50: { width: 1.5, dash: '5 4', radius: 2.5 },
};

interface Point {
  x: number;
  y: number;
  passed: boolean;
}

interface Scales {
  x: (rate: number) => number;
  y: (ms: number) => number;
  xTicks: number[];
  yTicks: number[];
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

// One decimal is finer than a pixel and keeps the output short.
function n(value: number): string {
  const rounded = Math.round(value * 10) / 10;
  return (rounded === 0 ? 0 : rounded).toString();
}

function colour(index: number): string {
  return COLOURS[index % COLOURS.length] ?? '#000';
}

function truncate(label: string): string {
  const chars = Array.from(label.replace(/\s+/g, ' '));
  return chars.length <= MAX_LABEL_CHARS ? chars.join('') : `${chars.slice(0, MAX_LABEL_CHARS - 1).join('')}…`;
}

/** Below 1 ms the log scale would run off to -∞; the bench cares about tens of ms anyway. */
function clampMs(ms: number): number {
  return Math.max(ms, 1);
}

function finiteSteps(system: SystemResult): StepResult[] {
  return stepsByRate(system.steps).filter((s) => Number.isFinite(s.rate) && Number.isFinite(s.latencyMs.p50) && Number.isFinite(s.latencyMs.p99));
}

/** 1, 2 or 5 times a power of ten, so that about `target` steps cover `max`. */
function niceStep(max: number, target: number): number {
  const raw = max / target;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const mantissa = [1, 2, 5, 10].find((m) => m * magnitude >= raw) ?? 10;
  return mantissa * magnitude;
}

function linearTicks(max: number): number[] {
  const top = max > 0 ? max : EMPTY_RATE_MAX;
  const step = niceStep(top, 6);
  const count = Math.ceil(top / step - 1e-9);
  return Array.from({ length: count + 1 }, (_, i) => i * step);
}

/** The 1-2-5 ticks from the last one at or below `lo` to the first one at or above `hi`. */
function logTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  for (let exponent = 0; ; exponent++) {
    for (const mantissa of [1, 2, 5]) {
      const tick = mantissa * 10 ** exponent;
      if (tick > lo || ticks.length === 0) ticks.push(tick);
      else ticks[0] = tick;
      if (tick >= hi && ticks.length > 1) return ticks;
    }
  }
}

function scales(results: BenchResults): Scales {
  const steps = results.systems.flatMap(finiteSteps);
  const rates = [...steps.map((s) => s.rate), ...results.systems.map((s) => s.maxRate).filter(Number.isFinite)];
  const xTicks = linearTicks(Math.max(0, ...rates));
  const latencies = steps.flatMap((s) => [s.latencyMs.p50, s.latencyMs.p99]);
  const limit = Number.isFinite(results.p99LimitMs) && results.p99LimitMs > 0 ? [results.p99LimitMs] : [];
  const span = (latencies.length > 0 ? latencies : EMPTY_LATENCY_RANGE).concat(limit).map(clampMs);
  const yTicks = logTicks(Math.min(...span), Math.max(...span));
  const xMax = xTicks[xTicks.length - 1] ?? EMPTY_RATE_MAX;
  const logLo = Math.log10(yTicks[0] ?? 1);
  const logHi = Math.log10(yTicks[yTicks.length - 1] ?? 10);
  return {
    x: (rate) => PLOT.left + (rate / xMax) * (PLOT.right - PLOT.left),
    y: (ms) => PLOT.bottom - ((Math.log10(clampMs(ms)) - logLo) / (logHi - logLo)) * (PLOT.bottom - PLOT.top),
    xTicks,
    yTicks,
  };
}

function title(results: BenchResults): string {
  const m = results.machine;
  const text = `Latency vs offered rate: ${m.cpus} × ${m.cpuModel}, ${formatShort(m.memoryGb)} GB, upstream ${formatShort(results.upstreamLatencyMs)} ms`;
  return `<text x="${n(WIDTH / 2)}" y="28" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(text)}</text>`;
}

function axes(s: Scales): string[] {
  const xTicks = s.xTicks.flatMap((t) => [
    `<line x1="${n(s.x(t))}" y1="${PLOT.top}" x2="${n(s.x(t))}" y2="${PLOT.bottom}" stroke="#eee"/>`,
    `<text x="${n(s.x(t))}" y="${PLOT.bottom + 18}" text-anchor="middle" class="x-tick">${formatInt(t)}</text>`,
  ]);
  const yTicks = s.yTicks.flatMap((t) => [
    `<line x1="${PLOT.left}" y1="${n(s.y(t))}" x2="${PLOT.right}" y2="${n(s.y(t))}" stroke="#eee"/>`,
    `<text x="${PLOT.left - 6}" y="${n(s.y(t) + 4)}" text-anchor="end" class="y-tick">${formatInt(t)}</text>`,
  ]);
  const midY = (PLOT.top + PLOT.bottom) / 2;
  return [
    ...xTicks,
    ...yTicks,
    `<rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.right - PLOT.left}" height="${PLOT.bottom - PLOT.top}" fill="none" stroke="#333"/>`,
    `<text x="${n((PLOT.left + PLOT.right) / 2)}" y="${HEIGHT - 22}" text-anchor="middle">offered load, req/s</text>`,
    `<text x="18" y="${n(midY)}" text-anchor="middle" transform="rotate(-90 18 ${n(midY)})">latency, ms (log scale)</text>`,
  ];
}

function limitLine(results: BenchResults, s: Scales): string[] {
  const limit = results.p99LimitMs;
  if (!(Number.isFinite(limit) && limit > 0)) return [];
  const y = n(s.y(limit));
  return [
    `<line x1="${PLOT.left}" y1="${y}" x2="${PLOT.right}" y2="${y}" stroke="#555" stroke-width="1.5" stroke-dasharray="8 5"/>`,
    `<text x="${PLOT.right - 4}" y="${n(s.y(limit) - 5)}" text-anchor="end" fill="#555">p99 limit ${formatInt(limit)} ms</text>`,
  ];
}

function marker(p: Point, radius: number, stroke: string): string {
  // Hollow markers show the steps that failed (lost, errors or p99 over the limit).
  const fill = p.passed ? stroke : '#fff';
  return `<circle cx="${n(p.x)}" cy="${n(p.y)}" r="${radius}" fill="${fill}" stroke="${stroke}" stroke-width="1.5"/>`;
}

function curve(points: readonly Point[], percentile: Percentile, stroke: string): string[] {
  const style = PERCENTILE_STYLE[percentile];
  const dash = style.dash === '' ? '' : ` stroke-dasharray="${style.dash}"`;
  const coords = points.map((p) => `${n(p.x)},${n(p.y)}`).join(' ');
  return [
    `<polyline points="${coords}" fill="none" stroke="${stroke}" stroke-width="${style.width}"${dash} class="${percentile}"/>`,
    ...points.map((p) => marker(p, style.radius, stroke)),
  ];
}

function maxRateMarker(system: SystemResult, s: Scales, stroke: string): string[] {
  if (!(Number.isFinite(system.maxRate) && system.maxRate > 0)) return [];
  const x = s.x(system.maxRate);
  return [
    `<line x1="${n(x)}" y1="${PLOT.top}" x2="${n(x)}" y2="${PLOT.bottom}" stroke="${stroke}" stroke-opacity="0.6" stroke-dasharray="2 3"/>`,
    `<path d="M${n(x)},${PLOT.bottom} l-5,9 h10 z" fill="${stroke}"/>`,
  ];
}

function series(system: SystemResult, index: number, s: Scales): string[] {
  const stroke = colour(index);
  const steps = finiteSteps(system);
  const points = (p: Percentile): Point[] => steps.map((step) => ({ x: s.x(step.rate), y: s.y(step.latencyMs[p]), passed: step.passed }));
  return [...maxRateMarker(system, s, stroke), ...curve(points('p50'), 'p50', stroke), ...curve(points('p99'), 'p99', stroke)];
}

function legendEntry(system: SystemResult, index: number): string[] {
  const y = PLOT.top + 8 + index * LEGEND_ROW;
  const stroke = colour(index);
  const max = system.maxRate > 0 ? `max ${formatInt(system.maxRate)} req/s` : 'no passing step';
  return [
    `<line x1="${LEGEND_X}" y1="${y}" x2="${LEGEND_X + 24}" y2="${y}" stroke="${stroke}" stroke-width="3"/>`,
    `<text x="${LEGEND_X + 30}" y="${y + 4}">${escapeXml(truncate(system.label))}</text>`,
    `<text x="${LEGEND_X + 30}" y="${y + 19}" font-size="11" fill="#555">${escapeXml(max)}</text>`,
  ];
}

// Explains line styles and markers once, in neutral grey, instead of per system.
function legendKey(systemCount: number): string[] {
  const top = PLOT.top + 8 + systemCount * LEGEND_ROW + 8;
  const row = (i: number): number => top + i * 20;
  const sample = (i: number, extra: string): string => `<line x1="${LEGEND_X}" y1="${row(i)}" x2="${LEGEND_X + 24}" y2="${row(i)}" stroke="#333"${extra}/>`;
  const label = (i: number, text: string): string => `<text x="${LEGEND_X + 30}" y="${row(i) + 4}" font-size="11">${text}</text>`;
  return [
    sample(0, ' stroke-width="2"'),
    label(0, 'p99'),
    sample(1, ' stroke-width="1.5" stroke-dasharray="5 4"'),
    label(1, 'p50'),
    `<circle cx="${LEGEND_X + 12}" cy="${row(2)}" r="3.5" fill="#fff" stroke="#333" stroke-width="1.5"/>`,
    label(2, 'failed step'),
    `<path d="M${LEGEND_X + 12},${row(3) - 4} l-5,9 h10 z" fill="#333"/>`,
    label(3, 'max sustained rate'),
  ];
}

/** Latency (p99 solid, p50 dashed, log scale) against offered rate, one colour per system. */
export function renderLatencyChart(results: BenchResults): string {
  const s = scales(results);
  const body = [
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="#fff"/>`,
    title(results),
    ...axes(s),
    ...limitLine(results, s),
    ...results.systems.flatMap((system, i) => series(system, i, s)),
    ...results.systems.flatMap(legendEntry),
    ...legendKey(results.systems.length),
  ];
  const open = `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`;
  return [open, ...body.map((line) => `  ${line}`), '</svg>'].join('\n');
}
