// @ts-check
// Device search: connections and recent requests of the devices whose id contains the text.
import { messageOf, requestJson } from './api.js';
import { badge, byId, el, nodeTd, numTd, td } from './dom.js';
import { PRIORITIES, fmtMs, fmtWhen, oneOf } from './format.js';

/** @typedef {import('../model.js').DeviceView} DeviceView */
/** @typedef {import('../model.js').RecentRequest} RecentRequest */

/** Wires the search form; returns {search()}. */
export function createDeviceSearch() {
  const form = byId('device-form');
  const input = /** @type {HTMLInputElement} */ (byId('device-search'));
  const results = byId('device-results');
  let seq = 0;

  const search = async () => {
    const mine = ++seq;
    const q = input.value.trim();
    if (!q) return results.replaceChildren(el('p', { className: 'hint', text: 'Type part of a device id, then Find.' }));
    results.replaceChildren(el('p', { className: 'hint', text: 'Searching…' }));
    try {
      const body = /** @type {{ devices: DeviceView[] } | null} */ (await requestJson(`/dashboard/api/devices?q=${encodeURIComponent(q)}`));
      if (mine === seq) renderDevices(results, Array.isArray(body?.devices) ? body.devices : []);
    } catch (err) {
      if (mine === seq) results.replaceChildren(el('p', { className: 'error', text: `Search failed: ${messageOf(err)}` }));
    }
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    search();
  });
  return { search };
}

/**
 * @param {HTMLElement} results
 * @param {DeviceView[]} devices
 */
function renderDevices(results, devices) {
  if (devices.length === 0) return results.replaceChildren(el('p', { className: 'empty', text: 'No device matches' }));
  results.replaceChildren(...devices.map(deviceCard));
}

/** @param {DeviceView} device */
function deviceCard(device) {
  const card = el('article', { className: 'device', data: { deviceId: String(device.deviceId) } }, [
    el('h3', { className: 'mono', text: device.deviceId }),
    connections(device.connections),
    recentTable(device.recent),
  ]);
  return card;
}

/** @param {DeviceView['connections'] | undefined} list */
function connections(list) {
  const items = Array.isArray(list) ? list : [];
  if (items.length === 0) return el('p', { className: 'hint', text: 'not connected' });
  const ul = el('ul', { className: 'connections' });
  for (const c of items) ul.append(el('li', { className: 'mono', text: `${c.clientId} @ ${c.instance}` }));
  return el('div', {}, [el('span', { className: 'hint', text: 'connected: ' }), ul]);
}

/** @param {RecentRequest[] | undefined} recent */
function recentTable(recent) {
  const rows = Array.isArray(recent) ? recent : [];
  if (rows.length === 0) return el('p', { className: 'empty', text: 'No recent request.' });
  const head = ['id', 'priority', 'outcome', 'latency ms', 'time', 'instance'];
  const numeric = new Set(['latency ms', 'time']);
  const thead = el('thead', {}, [
    el(
      'tr',
      {},
      head.map((h) => el('th', { className: numeric.has(h) ? 'num' : '', text: h, attrs: { scope: 'col' } })),
    ),
  ]);
  const tbody = el('tbody', {}, rows.map(recentRow));
  return el('div', { className: 'table-wrap' }, [el('table', { className: 'small' }, [thead, tbody])]);
}

/** @param {RecentRequest} r */
function recentRow(r) {
  return el('tr', {}, [
    td(r.id, 'mono'),
    nodeTd([priorityBadge(r.priority)]),
    nodeTd([outcomeBadge(r.outcome)]),
    numTd(fmtMs(r.latencyMs)),
    numTd(fmtWhen(r.at)),
    td(r.instance, 'mono'),
  ]);
}

/** @param {string | null} priority */
export function priorityBadge(priority) {
  const p = oneOf(priority, PRIORITIES, 'none');
  return el('span', { className: `prio prio-${p}`, text: priority ?? '—' });
}

/** @param {string | undefined} outcome */
function outcomeBadge(outcome) {
  const tone = outcome === 'ok' || outcome === 'cached' ? 'ok' : 'bad';
  return badge(outcome ?? '—', tone);
}
