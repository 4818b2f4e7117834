// @ts-check
// The live part of the page, fed by the event stream: the headline figures, the fleet and
// upstream tables and the traffic charts over the last 15 minutes.
import { badge, byId, el, nodeTd, numTd, setText, show, td } from './dom.js';
import { PRIORITIES, fmtClock, fmtDuration, fmtInt, fmtMs, fmtPct, fmtRate, oneOf, sum, yesNo } from './format.js';

/** @typedef {import('../model.js').Point} Point */
/** @typedef {import('../model.js').TickEvent} TickEvent */
/** @typedef {import('../model.js').HistoryEvent} HistoryEvent */
/** @typedef {import('../model.js').InstanceView} InstanceView */
/** @typedef {import('../model.js').ProviderView} ProviderView */
/** @typedef {{ points: Point[]; tickMs: number; lastTickAt: number }} LiveState */

const WINDOW_MS = 15 * 60_000;

/**
 * options: charts ({update}), onDeadLetters(count). Returns the event handlers.
 * @param {{ charts: { update(points: Point[]): void }; onDeadLetters(count: number | undefined): void }} options
 */
export function createLive(options) {
  /** @type {LiveState} */
  const state = { points: [], tickMs: 2000, lastTickAt: 0 };

  const trim = () => {
    const last = state.points.at(-1);
    if (last) state.points = state.points.filter((p) => p.t > last.t - WINDOW_MS);
  };

  return {
    get tickMs() {
      return state.tickMs;
    },
    /** Milliseconds since the last tick arrived (Infinity before the first). */
    sinceTick: () => (state.lastTickAt ? Date.now() - state.lastTickAt : Infinity),

    /** @param {HistoryEvent | null} event */
    history(event) {
      if (event && Number.isFinite(event.tickMs) && event.tickMs > 0) state.tickMs = event.tickMs;
      state.points = Array.isArray(event?.points) ? event.points.filter((p) => Number.isFinite(p?.t)) : [];
      trim();
      options.charts.update(state.points);
      const last = state.points.at(-1);
      if (last) renderPointFigures(last);
    },

    /** @param {TickEvent | null} event */
    tick(event) {
      const point = event?.point;
      if (point && Number.isFinite(point.t)) appendPoint(state, point);
      trim();
      state.lastTickAt = Date.now();
      options.charts.update(state.points);
      const now = point?.t ?? Date.now();
      if (point) renderPointFigures(point);
      renderInstances(event?.instances ?? [], now, state.tickMs);
      renderProviders(event?.providers ?? []);
      setText('updated-at', fmtClock(now));
      options.onDeadLetters(event?.deadLetters);
    },
  };
}

/**
 * @param {LiveState} state
 * @param {Point} point
 */
function appendPoint(state, point) {
  const last = state.points.at(-1);
  if (!last || point.t > last.t) state.points.push(point);
  else if (point.t === last.t) state.points[state.points.length - 1] = point;
}

/** @param {Point} point */
function renderPointFigures(point) {
  setText('total-rps', fmtRate(sum(PRIORITIES.map((p) => point.rps?.[p]))));
  const depth = point.depth;
  setText('total-depth', depth ? fmtInt(sum(PRIORITIES.map((p) => depth[p]))) : '—');
}

/**
 * @param {InstanceView[]} instances
 * @param {number} now
 * @param {number} tickMs
 */
function renderInstances(instances, now, tickMs) {
  setText('total-inflight', fmtInt(sum(instances.map((i) => i.inFlight))));
  const sorted = [...instances].sort((a, b) => String(a.instance).localeCompare(String(b.instance)));
  byId('instance-rows').replaceChildren(...sorted.map((i) => instanceRow(i, now, tickMs)));
  show('fleet-empty', instances.length === 0);
  setText('fleet-empty', 'No instance reported in the last tick.');
}

/**
 * @param {InstanceView} i
 * @param {number} now
 * @param {number} tickMs
 */
function instanceRow(i, now, tickMs) {
  const stale = Number.isFinite(i.seenAt) && now - i.seenAt > 3 * tickMs;
  /** @type {Array<Node | string>} */
  const name = [el('span', { className: 'mono', text: i.instance })];
  if (stale) name.push(' ', badge('stale', 'muted'));
  const ready = i.ready ? badge('yes', 'ok') : badge(`no: ${(Array.isArray(i.notReady) ? i.notReady : []).join(', ') || 'not ready'}`, 'bad');
  const row = el('tr', { className: stale ? 'stale' : '' }, [
    nodeTd(name),
    td(i.version, 'mono'),
    numTd(fmtDuration(now - i.startedAt)),
    numTd(fmtInt(i.connectedClients)),
    numTd(fmtInt(i.inFlight)),
    nodeTd([badge(yesNo(i.storeReachable), i.storeReachable ? 'ok' : 'bad')]),
    nodeTd([ready]),
  ]);
  row.dataset.instance = String(i.instance);
  return row;
}

/** @type {Record<string, string>} */
const CIRCUIT_TONE = { closed: 'ok', 'half-open': 'warn', open: 'bad' };
/** @type {Record<string, string>} */
const KEY_TONE = { healthy: 'ok', cooling: 'warn', revoked: 'bad' };

/** @param {ProviderView[]} providers */
function renderProviders(providers) {
  byId('provider-rows').replaceChildren(...providers.map(providerRow));
  show('upstream-empty', providers.length === 0);
}

/** @param {ProviderView} p */
function providerRow(p) {
  const circuit = oneOf(p.circuit, Object.keys(CIRCUIT_TONE), 'unknown');
  const latency = p.latency ? `${fmtMs(p.latency.p50)} / ${fmtMs(p.latency.p99)}` : '—';
  const row = el('tr', {}, [
    td(p.provider, 'mono'),
    nodeTd([el('span', { className: `badge circuit circuit-${circuit} badge-${CIRCUIT_TONE[circuit] ?? 'muted'}`, text: p.circuit })]),
    nodeTd([badge(yesNo(p.available), p.available ? 'ok' : 'bad')]),
    nodeTd([keyList(p.keys)]),
    numTd(fmtRate(p.callsPerS)),
    numTd(fmtPct(p.errorRate)),
    numTd(fmtRate(p.rateLimitedPerS)),
    numTd(latency),
  ]);
  row.dataset.provider = String(p.provider);
  return row;
}

/** @param {ProviderView['keys'] | undefined} keys */
function keyList(keys) {
  const list = el('ul', { className: 'keys' });
  for (const k of Array.isArray(keys) ? keys : []) {
    const tone = KEY_TONE[k?.state] ?? 'muted';
    list.append(el('li', { className: `key key-${tone}` }, [el('span', { className: 'mono', text: k?.id }), ' ', badge(k?.state, tone)]));
  }
  if (!list.childElementCount) list.append(el('li', { className: 'muted', text: 'no keys' }));
  return list;
}
