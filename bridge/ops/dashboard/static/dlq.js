// @ts-check
// Dead letters: the list a page at a time (oldest first; "Show older…" reads the next page), a
// request shown on demand, and the operator actions (replay one, replay all, purge), each
// confirmed first and sent with the admin token.
import { ApiError, getToken, messageOf, requestJson, seg } from './api.js';
import { confirmAction } from './confirm.js';
import { byId, el, nodeTd, numTd, setText, show, td } from './dom.js';
import { fmtInt, fmtWhen } from './format.js';
import { priorityBadge } from './devices.js';

/** @typedef {import('../model.js').DeadLetterView} DeadLetterView */
/** @typedef {import('../model.js').AccessView} AccessView */
/** @typedef {{ count: number; entries: DeadLetterView[]; next: string | null }} DlqPage */
/** @typedef {{ entry: DeadLetterView & { request: unknown } }} DlqEntry */
/** @typedef {{ replayed?: number; purged?: number } | null} ActionResult what /v1/ answers an action */
/**
 * @typedef {object} DlqState
 * @property {number | null} count
 * @property {DeadLetterView[]} entries
 * @property {string | null} next
 * @property {boolean} actions
 * @property {boolean} busy
 * @property {Map<string, unknown>} requests
 * @property {Set<string>} open
 * @property {boolean} loading
 * @property {boolean} again
 */

const COLUMNS = 7;

/** Wires the section; returns {refresh(), setAccess(access), noteCount(n)}. */
export function createDeadLetters() {
  /** @type {DlqState} */
  const state = { count: null, entries: [], next: null, actions: false, busy: false, requests: new Map(), open: new Set(), loading: false, again: false };
  const rows = byId('dlq-rows');

  // One load at a time; a refresh asked for meanwhile runs once the current one is done. A
  // refresh reads the first page again; `more` appends the next one.
  /** @param {boolean} more */
  const load = async (more) => {
    if (state.loading) {
      if (!more) state.again = true;
      return;
    }
    state.loading = true;
    try {
      const after = more && state.next ? `?after=${encodeURIComponent(state.next)}` : '';
      const body = /** @type {DlqPage | null} */ (await requestJson(`/dashboard/api/dlq${after}`));
      const entries = Array.isArray(body?.entries) ? body.entries : [];
      render(state, { ...body, entries: more ? [...state.entries, ...entries] : entries });
      setText('dlq-error', '');
    } catch (err) {
      setText('dlq-error', `dead letters unavailable: ${messageOf(err)}`);
    } finally {
      state.loading = false;
    }
    if (state.again) {
      state.again = false;
      await refresh();
    }
  };
  const refresh = () => load(false);

  rows.addEventListener('click', (event) => onRowClick(state, event, refresh));
  byId('dlq-replay-all').addEventListener('click', () => bulk(state, 'replay', refresh));
  byId('dlq-purge').addEventListener('click', () => bulk(state, 'purge', refresh));
  byId('dlq-refresh').addEventListener('click', refresh);
  byId('dlq-more').addEventListener('click', () => load(true));

  return {
    refresh,
    /** @param {AccessView | null} access */
    setAccess(access) {
      state.actions = Boolean(access?.actions);
      updateButtons(state);
    },
    /** The count from a tick: reload the list when it changed. */
    /** @param {number | undefined} count */
    noteCount(count) {
      if (Number.isFinite(count) && count !== state.count) refresh();
    },
    updateButtons: () => updateButtons(state),
  };
}

/**
 * @param {DlqState} state
 * @param {Partial<DlqPage>} body
 */
function render(state, body) {
  const entries = Array.isArray(body?.entries) ? body.entries : [];
  state.entries = entries;
  state.next = typeof body?.next === 'string' ? body.next : null;
  const count = typeof body?.count === 'number' && Number.isFinite(body.count) ? body.count : entries.length;
  state.count = count;
  show('dlq-more', state.next !== null);
  setText('dlq-count', fmtInt(count));
  setText('dlq-shown', entries.length < count ? `showing ${entries.length} of ${fmtInt(count)}` : '');
  const keys = new Set(entries.map(keyOf));
  for (const key of state.open) if (!keys.has(key)) state.open.delete(key);
  for (const key of state.requests.keys()) if (!state.open.has(key)) state.requests.delete(key);
  const rows = [];
  for (const entry of entries) {
    rows.push(entryRow(state, entry));
    if (state.open.has(keyOf(entry)) && state.requests.has(keyOf(entry))) rows.push(requestRow(keyOf(entry), state.requests.get(keyOf(entry))));
  }
  byId('dlq-rows').replaceChildren(...rows);
  show('dlq-empty', entries.length === 0);
  updateButtons(state);
}

/** @param {DeadLetterView} entry */
const keyOf = (entry) => `${entry.deviceId}/${entry.id}`;

/**
 * @param {DlqState} state
 * @param {DeadLetterView} entry
 */
function entryRow(state, entry) {
  const key = keyOf(entry);
  const cause = entry.error
    ? [el('code', { text: entry.error.code }), ' ', el('span', { text: entry.error.message })]
    : [el('span', { className: 'muted', text: '—' })];
  const when = Date.parse(entry.at);
  const replay = el('button', { className: 'replay', text: 'Replay', attrs: { type: 'button' } });
  replay.disabled = !state.actions || state.busy;
  const showRequest = el('button', {
    className: 'show-request',
    text: state.open.has(key) ? 'Hide request' : 'Show request',
    attrs: { type: 'button', 'aria-expanded': state.open.has(key) },
  });
  return el('tr', { data: { key } }, [
    td(entry.deviceId, 'mono'),
    td(entry.id, 'mono'),
    nodeTd([priorityBadge(entry.priority)]),
    el('td', { className: 'num', text: fmtWhen(when), attrs: { title: String(entry.at) } }),
    nodeTd(cause, 'cause'),
    numTd(fmtInt(entry.attempts)),
    nodeTd([el('span', { className: 'row-buttons' }, [replay, showRequest])]),
  ]);
}

/**
 * @param {string} key
 * @param {unknown} request
 */
function requestRow(key, request) {
  const pre = el('pre', { className: 'request-json', text: JSON.stringify(request, null, 2) });
  return el('tr', { className: 'request-row', data: { requestFor: key } }, [el('td', { attrs: { colspan: COLUMNS } }, [pre])]);
}

/**
 * @param {DlqState} state
 * @param {MouseEvent} event
 * @param {() => Promise<void>} refresh
 */
async function onRowClick(state, event, refresh) {
  const button = /** @type {Element} */ (event.target).closest('button');
  const row = /** @type {HTMLTableRowElement | null | undefined} */ (button?.closest('tr[data-key]'));
  if (!button || !row) return;
  const key = /** @type {string} */ (row.dataset.key);
  if (button.classList.contains('show-request')) return toggleRequest(state, row, button, key);
  if (button.classList.contains('replay')) return replayOne(state, key, refresh);
}

/**
 * @param {DlqState} state
 * @param {HTMLTableRowElement} row
 * @param {HTMLButtonElement} button
 * @param {string} key
 */
async function toggleRequest(state, row, button, key) {
  if (state.open.has(key)) {
    state.open.delete(key);
    const next = row.nextElementSibling;
    if (next?.classList.contains('request-row')) next.remove();
    button.textContent = 'Show request';
    button.setAttribute('aria-expanded', 'false');
    return;
  }
  const [deviceId, ...rest] = key.split('/');
  button.disabled = true;
  try {
    const body = /** @type {DlqEntry | null} */ (await requestJson(`/dashboard/api/dlq/${seg(deviceId)}/${seg(rest.join('/'))}`));
    state.requests.set(key, body?.entry?.request ?? null);
    state.open.add(key);
    row.after(requestRow(key, state.requests.get(key)));
    button.textContent = 'Hide request';
    button.setAttribute('aria-expanded', 'true');
  } catch (err) {
    result(`show request ${key}: ${messageOf(err)}`, true);
  } finally {
    button.disabled = false;
  }
}

/**
 * @param {DlqState} state
 * @param {string} key
 * @param {() => Promise<void>} refresh
 */
async function replayOne(state, key, refresh) {
  const [deviceId, ...rest] = key.split('/');
  const path = `/v1/dlq/${seg(deviceId)}/${seg(rest.join('/'))}/replay`;
  await act(state, `Replay the dead letter ${key}?`, false, { method: 'POST', path }, (b) => `replayed ${b?.replayed ?? 0}`, refresh);
}

/**
 * @param {DlqState} state
 * @param {'replay' | 'purge'} kind
 * @param {() => Promise<void>} refresh
 */
function bulk(state, kind, refresh) {
  const n = state.count ?? 0;
  if (kind === 'replay') {
    const request = { method: 'POST', path: '/v1/dlq/replay' };
    return act(state, `Replay all ${fmtInt(n)} dead letters?`, false, request, (b) => `replayed ${b?.replayed ?? 0}`, refresh);
  }
  const request = { method: 'DELETE', path: '/v1/dlq' };
  const message = `Purge all ${fmtInt(n)} dead letters? They cannot be replayed afterwards.`;
  return act(state, message, true, request, (b) => `purged ${b?.purged ?? 0}`, refresh);
}

/**
 * @param {DlqState} state
 * @param {string} question
 * @param {boolean} danger
 * @param {{ method: string; path: string }} request
 * @param {(body: ActionResult) => string} describe
 * @param {() => Promise<void>} refresh
 */
async function act(state, question, danger, request, describe, refresh) {
  if (state.busy || !(await confirmAction(question, danger))) return;
  state.busy = true;
  updateButtons(state);
  result('working…', false);
  try {
    const body = /** @type {ActionResult} */ (await requestJson(request.path, { method: request.method, action: true }));
    result(describe(body), false);
  } catch (err) {
    result(messageOf(err), true);
    if (err instanceof ApiError && err.isAuth) byId('token').classList.add('attention');
  } finally {
    state.busy = false;
    await refresh();
    updateButtons(state);
  }
}

/**
 * @param {string} text
 * @param {boolean} isError
 */
function result(text, isError) {
  const line = byId('dlq-result');
  line.textContent = text;
  line.classList.toggle('error', isError);
}

/** @param {DlqState} state */
function updateButtons(state) {
  const disabled = !state.actions || state.busy;
  for (const id of ['dlq-replay-all', 'dlq-purge']) /** @type {HTMLButtonElement} */ (byId(id)).disabled = disabled || !state.count;
  for (const b of byId('dlq-rows').querySelectorAll('button.replay')) /** @type {HTMLButtonElement} */ (b).disabled = disabled;
  show('dlq-note', !state.actions);
  show('dlq-token-hint', state.actions && !getToken());
}
