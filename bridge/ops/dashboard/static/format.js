// @ts-check
// Formatting of the figures the dashboard shows: plain functions, no DOM.

/** @typedef {import('../../../../contract/names.js').Priority} Priority */

/** @type {readonly Priority[]} */
export const PRIORITIES = ['critical', 'high', 'normal', 'low'];

/** @param {number} n */
const pad2 = (n) => String(n).padStart(2, '0');
/** @type {(n: unknown) => n is number} */
const isNum = (n) => typeof n === 'number' && Number.isFinite(n);

/**
 * HH:MM:SS in local time.
 * @param {number} ms
 */
export function fmtClock(ms) {
  const d = new Date(ms);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

/**
 * HH:MM:SS today; YYYY-MM-DD HH:MM:SS on another day.
 * @param {unknown} ms
 */
export function fmtWhen(ms) {
  if (!isNum(ms)) return '—';
  const d = new Date(ms);
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return fmtClock(ms);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ${fmtClock(ms)}`;
}

/**
 * A span of time, human: "45 s", "12 min", "3 h 12 min", "2 d 5 h".
 * @param {unknown} ms
 */
export function fmtDuration(ms) {
  if (!isNum(ms)) return '—';
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/**
 * A rate or other small decimal: more decimals when small.
 * @param {unknown} n
 */
export function fmtRate(n) {
  if (!isNum(n)) return '—';
  const abs = Math.abs(n);
  if (abs === 0) return '0';
  if (abs < 10) return n.toFixed(2);
  if (abs < 100) return n.toFixed(1);
  return fmtInt(n);
}

/** @param {unknown} n */
export function fmtInt(n) {
  return isNum(n) ? Math.round(n).toLocaleString('en-US') : '—';
}

/**
 * Milliseconds: one decimal under 10 ms.
 * @param {unknown} n
 */
export function fmtMs(n) {
  if (!isNum(n)) return '—';
  return n < 10 ? n.toFixed(1) : fmtInt(n);
}

/**
 * A 0..1 share as a percentage number (the column says %).
 * @param {unknown} share
 */
export function fmtPct(share) {
  return isNum(share) ? (share * 100).toFixed(1) : '—';
}

/**
 * US dollars with 4 decimals.
 * @param {unknown} n
 */
export function fmtUsd(n) {
  if (!isNum(n)) return '—';
  return `$${n.toLocaleString('en-US', { minimumFractionDigits: 4, maximumFractionDigits: 4 })}`;
}

/**
 * Compact axis labels: 1.2k, 3.4M.
 * @param {unknown} n
 */
export function fmtAxis(n) {
  if (!isNum(n)) return '';
  const abs = Math.abs(n);
  if (abs >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (abs >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return String(+n.toFixed(3));
}

/** @param {unknown} b */
export const yesNo = (b) => (b ? 'yes' : 'no');

/**
 * Sum of the finite numbers among `values`.
 * @param {Iterable<unknown>} values
 */
export function sum(values) {
  let total = 0;
  for (const v of values) if (isNum(v)) total += v;
  return total;
}

/**
 * `value` when it is one of `allowed`, else `fallback` (used to build class names from data).
 * @template {string} T
 * @template {string} F
 * @param {unknown} value
 * @param {readonly T[]} allowed
 * @param {F} fallback
 * @returns {T | F}
 */
export function oneOf(value, allowed, fallback) {
  return /** @type {readonly unknown[]} */ (allowed).includes(value) ? /** @type {T} */ (value) : fallback;
}
