// @ts-check
// The traffic charts (uPlot, the global from /dashboard/uPlot.iife.min.js). Each chart is
// rebuilt when its set of series changes and otherwise updated with setData.
import { PRIORITIES, fmtAxis, fmtClock, fmtMs, fmtRate } from './format.js';

/** @typedef {import('./format.js').Priority} Priority */
/** @typedef {import('../model.js').Point} Point */
/** @typedef {keyof Point['outcomes']} Outcome */
/** @typedef {typeof import('uplot')} UPlotClass */
/** @typedef {import('uplot')} UPlot */
/** @typedef {{ label: string; stroke: string | undefined; dash?: number[] | undefined; fmt: (n: number) => string }} SeriesSpec */
/** @typedef {{ series(points: Point[]): SeriesSpec[]; values(points: Point[]): Array<Array<number | null>> }} ChartSpec */
/** @typedef {{ percentile: 'p50' | 'p99' }} LatencyState */

const HEIGHT = 210;

/** @type {Record<Priority, string>} */
const FALLBACK_COLORS = { critical: '#c62828', high: '#e65100', normal: '#1565c0', low: '#6b7280' };

/**
 * One color per outcome the model names: the type asks for one for every new error code.
 * @type {Record<Outcome, string>}
 */
const OUTCOME_COLORS = {
  ok: '#2e7d32',
  cached: '#00838f',
  invalid_request: '#795548',
  payload_too_large: '#9e9d24',
  rate_limited: '#d81b60',
  queue_full: '#6a1b9a',
  budget_exceeded: '#283593',
  expired: '#b8860b',
  upstream_error: '#c62828',
  upstream_timeout: '#ef6c00',
  invalid_output: '#5d4037',
  unavailable: '#37474f',
  internal: '#000000',
};
/** For an outcome the page does not know (a newer bridge's). */
const SPARE_COLORS = ['#8e24aa', '#00695c', '#ad1457'];
const OUTCOME_ORDER = /** @type {Outcome[]} */ (Object.keys(OUTCOME_COLORS));

/**
 * Priority colors from the stylesheet (--prio-*), so badges and lines agree.
 * @returns {Record<Priority, string>}
 */
function priorityColors() {
  const style = getComputedStyle(document.documentElement);
  const colors = /** @type {Record<Priority, string>} */ ({});
  for (const p of PRIORITIES) colors[p] = style.getPropertyValue(`--prio-${p}`).trim() || FALLBACK_COLORS[p];
  return colors;
}

/** @param {unknown} value */
const at = (value) => (typeof value === 'number' && Number.isFinite(value) ? value : null);

/**
 * The outcome keys present in any point: ok and cached first, then error codes.
 * @param {Point[]} points
 */
function outcomeKeys(points) {
  /** @type {Set<Outcome>} */
  const seen = new Set(['ok', 'cached']);
  for (const p of points) for (const key of /** @type {Outcome[]} */ (Object.keys(p.outcomes ?? {}))) seen.add(key);
  const known = OUTCOME_ORDER.filter((k) => seen.has(k));
  const other = [...seen].filter((k) => !OUTCOME_ORDER.includes(k)).sort();
  return [...known, ...other];
}

/**
 * @param {Record<Priority, string>} colors
 * @returns {ChartSpec}
 */
function rpsSpec(colors) {
  return {
    series: () => PRIORITIES.map((p) => ({ label: p, stroke: colors[p], fmt: fmtRate })),
    values: (points) => PRIORITIES.map((p) => points.map((pt) => at(pt.rps?.[p]))),
  };
}

/** @returns {ChartSpec} */
function outcomesSpec() {
  return {
    series: (points) => outcomeKeys(points).map((k, i) => ({ label: k, stroke: OUTCOME_COLORS[k] ?? SPARE_COLORS[i % SPARE_COLORS.length], fmt: fmtRate })),
    values: (points) => outcomeKeys(points).map((k) => points.map((pt) => at(pt.outcomes?.[k]) ?? 0)),
  };
}

/**
 * @param {Record<Priority, string>} colors
 * @returns {ChartSpec}
 */
function depthSpec(colors) {
  return {
    series: () => PRIORITIES.map((p) => ({ label: p, stroke: colors[p], fmt: fmtRate })),
    values: (points) => PRIORITIES.map((p) => points.map((pt) => (pt.depth ? at(pt.depth[p]) : null))),
  };
}

/**
 * End to end (solid) and queue wait (dashed) at the chosen percentile.
 * @param {Record<Priority, string>} colors
 * @param {LatencyState} state
 * @returns {ChartSpec}
 */
function latencySpec(colors, state) {
  /** @type {Array<{ key: 'e2e' | 'wait'; name: string; dash: number[] | undefined }>} */
  const kinds = [
    { key: 'e2e', name: 'end to end', dash: undefined },
    { key: 'wait', name: 'wait', dash: [6, 4] },
  ];
  return {
    series: () => kinds.flatMap((k) => PRIORITIES.map((p) => ({ label: `${p} ${k.name}`, stroke: colors[p], dash: k.dash, fmt: fmtMs }))),
    values: (points) => kinds.flatMap((k) => PRIORITIES.map((p) => points.map((pt) => at(pt[k.key]?.[p]?.[state.percentile])))),
  };
}

/**
 * @param {SeriesSpec[]} series
 * @param {number} width
 * @returns {import('uplot').Options}
 */
function uplotOptions(series, width) {
  const axis = { stroke: '#3d4752', grid: { stroke: '#e3e7ec', width: 1 }, ticks: { stroke: '#c9ced6', width: 1 } };
  return {
    width,
    height: HEIGHT,
    cursor: { drag: { x: false, y: false } },
    legend: { live: true },
    scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
    axes: [
      { ...axis, values: (_u, splits) => splits.map((v) => fmtClock(v * 1000).slice(0, 5)) },
      { ...axis, size: 54, values: (_u, splits) => splits.map(fmtAxis) },
    ],
    series: [
      { label: 'time', value: (_u, v) => (v == null ? '—' : fmtClock(v * 1000)) },
      ...series.map(
        (s) =>
          /** @type {import('uplot').Series} */ ({
            label: s.label,
            stroke: s.stroke,
            width: s.dash ? 1.5 : 2,
            dash: s.dash,
            spanGaps: false,
            value: (_u, v) => (v == null ? '—' : s.fmt(v)),
          }),
      ),
    ],
  };
}

/** One chart in its container; update(points) draws the given points. */
class Chart {
  /**
   * @param {UPlotClass} UPlot
   * @param {HTMLElement} container
   * @param {ChartSpec} spec
   */
  constructor(UPlot, container, spec) {
    this.UPlot = UPlot;
    this.container = container;
    this.spec = spec;
    /** @type {UPlot | null} */
    this.plot = null;
    this.signature = '';
    this.width = 0;
    new ResizeObserver(() => this.resize()).observe(container);
  }

  /** @param {Point[]} points */
  update(points) {
    const series = this.spec.series(points);
    const signature = series.map((s) => s.label).join('|');
    /** @type {import('uplot').AlignedData} */
    const data = [points.map((pt) => pt.t / 1000), ...this.spec.values(points)];
    if (this.plot && signature === this.signature) this.plot.setData(data);
    else this.build(series, signature, data);
    this.showLatest(data[0].length);
  }

  /**
   * @param {SeriesSpec[]} series
   * @param {string} signature
   * @param {import('uplot').AlignedData} data
   */
  build(series, signature, data) {
    this.plot?.destroy();
    this.signature = signature;
    this.width = this.containerWidth();
    this.plot = new this.UPlot(uplotOptions(series, this.width), data, this.container);
  }

  /**
   * Unless the cursor is on the chart, the legend shows the newest values.
   * @param {number} length
   */
  showLatest(length) {
    if (this.plot && length > 0 && this.plot.cursor.idx == null) this.plot.setLegend({ idx: length - 1 });
  }

  containerWidth() {
    return Math.max(200, Math.floor(this.container.clientWidth));
  }

  resize() {
    const width = this.containerWidth();
    if (!this.plot || width === this.width) return;
    this.width = width;
    this.plot.setSize({ width, height: HEIGHT });
  }
}

/**
 * Creates the four charts; returns {update(points), setPercentile(p), available}.
 * @param {(id: string) => HTMLElement} byId
 * @returns {{ available: boolean; update(points: Point[]): void; setPercentile(percentile: LatencyState['percentile']): void }}
 */
export function createCharts(byId) {
  // The global uPlot's script defines, read when the page starts; undefined when it did not load.
  const UPlot = /** @type {{ uPlot?: UPlotClass }} */ (globalThis).uPlot;
  if (typeof UPlot !== 'function') return { available: false, update() {}, setPercentile() {} };
  const colors = priorityColors();
  /** @type {LatencyState} */
  const latencyState = { percentile: 'p99' };
  const latency = new Chart(UPlot, byId('chart-latency'), latencySpec(colors, latencyState));
  const charts = [
    new Chart(UPlot, byId('chart-rps'), rpsSpec(colors)),
    new Chart(UPlot, byId('chart-outcomes'), outcomesSpec()),
    new Chart(UPlot, byId('chart-depth'), depthSpec(colors)),
    latency,
  ];
  /** @type {Point[]} */
  let last = [];
  return {
    available: true,
    update(points) {
      last = points;
      for (const chart of charts) chart.update(points);
    },
    setPercentile(percentile) {
      latencyState.percentile = percentile;
      latency.update(last);
    },
  };
}
