// @ts-check
// Tokens and cost: today (since midnight in the budgets' time zone) and the last 24 hours.
import { isAbort, messageOf, requestJson } from './api.js';
import { byId, el, setText, table } from './dom.js';
import { PRIORITIES, fmtInt, fmtUsd, fmtWhen } from './format.js';

/** @typedef {import('../model.js').UsageView} UsageView */
/** @typedef {UsageView['today']} UsageReport */
/** @typedef {UsageReport['total']} UsageTotals */

const REFRESH_MS = 30_000;
const TOP_DEVICES = 10;

/** @param {string} first */
const COLUMNS = (first) => [
  { label: first },
  { label: 'cost (USD)', num: true },
  { label: 'requests', num: true },
  { label: 'prompt tokens', num: true },
  { label: 'completion tokens', num: true },
];

/** Starts fetching usage now and every 30 s; returns {refresh(), stop()}. */
export function createCost() {
  /** @type {ReturnType<typeof setInterval> | undefined} */
  let timer;
  const refresh = async () => {
    try {
      const view = /** @type {UsageView | null} */ (await requestJson('/dashboard/api/usage'));
      renderUsage(view);
      setText('cost-error', '');
    } catch (err) {
      if (!isAbort(err)) setText('cost-error', `usage unavailable: ${messageOf(err)}`);
    }
  };
  return {
    refresh,
    start() {
      clearInterval(timer);
      refresh();
      timer = setInterval(refresh, REFRESH_MS);
    },
    stop() {
      clearInterval(timer);
    },
  };
}

/** @param {UsageView | null} view */
function renderUsage(view) {
  setText('cost-tz', view?.timeZone ? `“Today” starts at midnight, ${view.timeZone}.` : '');
  byId('cost-today').replaceChildren(...reportParts('Today', view?.today));
  byId('cost-24h').replaceChildren(...reportParts('Last 24 h', view?.last24h));
}

/**
 * @param {string} title
 * @param {UsageReport | undefined} report
 */
function reportParts(title, report) {
  const heading = el('h3', { text: title });
  if (!report) return [heading, el('p', { className: 'empty', text: 'No data.' })];
  const range = el('p', { className: 'hint', text: `${fmtWhen(report.fromMs)} – ${fmtWhen(report.toMs)}` });
  const parts = [heading, range, totals(report.total)];
  parts.push(breakdown('By device', 'device', topDevices(report.byDevice), report.byDevice));
  parts.push(breakdown('By model', 'model', sortByCost(report.byModel)));
  parts.push(breakdown('By priority', 'priority', byPriority(report.byPriority)));
  if (report.byTemplate && Object.keys(report.byTemplate).length > 0) {
    parts.push(breakdown('By template', 'template', sortByCost(report.byTemplate)));
  }
  return parts;
}

/** @param {UsageTotals | undefined} t */
function totals(t) {
  /** @type {(label: string, value: string, className?: string) => HTMLElement} */
  const item = (label, value, className = '') =>
    el('div', { className: `total ${className}` }, [el('dt', { text: label }), el('dd', { className: 'num', text: value })]);
  return el('dl', { className: 'totals' }, [
    item('requests', fmtInt(t?.requests)),
    item('prompt tokens', fmtInt(t?.promptTokens)),
    item('completion tokens', fmtInt(t?.completionTokens)),
    item('cost', fmtUsd(t?.costUsd), 'total-cost'),
  ]);
}

/** @param {UsageTotals | undefined} t */
const tokens = (t) => (t?.promptTokens ?? 0) + (t?.completionTokens ?? 0);

/**
 * @param {Record<string, UsageTotals> | undefined} record
 * @returns {Array<[string, UsageTotals]>}
 */
function sortByCost(record) {
  return Object.entries(record ?? {}).sort(([, a], [, b]) => (b?.costUsd ?? 0) - (a?.costUsd ?? 0) || tokens(b) - tokens(a));
}

/** @param {Record<string, UsageTotals> | undefined} record */
function topDevices(record) {
  return sortByCost(record).slice(0, TOP_DEVICES);
}

/** @param {Record<string, UsageTotals> | undefined} record */
function byPriority(record) {
  /** @type {readonly string[]} */
  const names = PRIORITIES;
  /** @param {string} name */
  const rank = (name) => (names.includes(name) ? names.indexOf(name) : names.length);
  return Object.entries(record ?? {}).sort(([a], [b]) => rank(a) - rank(b) || a.localeCompare(b));
}

/**
 * @param {string} caption
 * @param {string} first
 * @param {Array<[string, UsageTotals]>} entries
 * @param {Record<string, UsageTotals>} [all]
 */
function breakdown(caption, first, entries, all) {
  const total = all ? Object.keys(all).length : entries.length;
  const label = total > entries.length ? `${caption} (top ${entries.length} of ${total})` : caption;
  if (entries.length === 0) return el('div', { className: 'breakdown' }, [el('h4', { text: label }), el('p', { className: 'empty', text: 'None.' })]);
  const rows = entries.map(([name, t]) => [name, fmtUsd(t?.costUsd), fmtInt(t?.requests), fmtInt(t?.promptTokens), fmtInt(t?.completionTokens)]);
  return el('div', { className: 'breakdown' }, [el('h4', { text: label }), table(COLUMNS(first), rows)]);
}
