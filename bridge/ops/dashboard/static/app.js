// @ts-check
// The operator dashboard's page: asks /dashboard/api/access what it may do, then follows the
// event stream and loads usage, devices and dead letters (see ../model.ts for the shapes).
import { authHeaders, getToken, messageOf, onAuthFailure, requestJson, setToken } from './api.js';
import { createCharts } from './charts.js';
import { createCost } from './cost.js';
import { createDeadLetters } from './dlq.js';
import { createDeviceSearch } from './devices.js';
import { byId, setText, show } from './dom.js';
import { createLive } from './live.js';
import { openStream } from './sse.js';

/** @typedef {import('../model.js').AccessView} AccessView */
/** @typedef {import('./sse.js').StreamState} StreamState */

const RETRY_MS = 2000;

/** @type {{ access: AccessView | null; streamOpen: boolean; connectedOnce: boolean }} */
const page = { access: null, streamOpen: false, connectedOnce: false };

const charts = createCharts(byId);
const dlq = createDeadLetters();
const cost = createCost();
const live = createLive({ charts, onDeadLetters: (n) => dlq.noteCount(n) });
const stream = openStream({
  url: '/dashboard/api/events',
  headers: authHeaders,
  onEvent: handleEvent,
  onState: handleStreamState,
  retryMs: RETRY_MS,
  idleMs: () => Math.max(20_000, live.tickMs * 10),
});
createDeviceSearch();

/**
 * @param {string} name
 * @param {string} data
 */
function handleEvent(name, data) {
  if (name === 'history') live.history(JSON.parse(data));
  else if (name === 'tick') live.tick(JSON.parse(data));
}

/** @param {StreamState} state */
function handleStreamState({ kind, detail }) {
  page.streamOpen = kind === 'open';
  if (kind === 'connecting') status(page.connectedOnce ? 'reconnecting…' : 'connecting…');
  else if (kind === 'open') {
    page.connectedOnce = true;
    status('connected');
  } else if (kind === 'retrying') status(`reconnecting… (${detail})`, 'warn');
  else if (kind === 'unauthorized') authFailed();
  updateLive();
}

/** @param {string} text */
function status(text, tone = '') {
  const line = byId('status');
  line.textContent = text;
  line.className = `status ${tone ? `status-${tone}` : ''}`;
}

function authFailed() {
  status('token required or wrong — enter the admin token', 'error');
  const input = byId('token');
  input.classList.add('attention');
  if (document.activeElement === document.body) input.focus();
}

/** The "live · updated HH:MM:SS" indicator: live while ticks arrive, stale or offline otherwise. */
function updateLive() {
  const since = live.sinceTick();
  const state = !page.streamOpen ? 'offline' : since <= 3 * live.tickMs ? 'live' : since === Infinity ? 'waiting' : 'stale';
  const indicator = byId('live');
  indicator.className = `live live-${state}`;
  setText('live-label', state);
}

/** @returns {Promise<AccessView>} */
async function loadAccess() {
  for (;;) {
    try {
      return /** @type {AccessView} */ (await requestJson('/dashboard/api/access'));
    } catch (err) {
      status(`bridge unreachable (${messageOf(err)}) — retrying…`, 'warn');
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}

/**
 * Starts (or restarts, after a new token) everything that reads from the bridge.
 * @param {AccessView} access
 */
function start(access) {
  const locked = !access.open && !getToken();
  show('lock-note', locked);
  document.body.classList.toggle('locked', locked);
  dlq.setAccess(access);
  if (locked) {
    stream.stop();
    cost.stop();
    status('enter the admin token to view the dashboard', 'warn');
    byId('token').focus();
    return;
  }
  stream.restart();
  cost.start();
  dlq.refresh();
}

function wireTokenForm() {
  const input = /** @type {HTMLInputElement} */ (byId('token'));
  input.value = getToken();
  byId('token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    setToken(input.value);
    input.classList.remove('attention');
    if (page.access) start(page.access);
  });
}

function wireLatencyToggle() {
  for (const percentile of /** @type {const} */ (['p99', 'p50'])) {
    byId(`latency-${percentile}`).addEventListener('click', () => {
      for (const p of ['p99', 'p50']) byId(`latency-${p}`).setAttribute('aria-pressed', String(p === percentile));
      setText('latency-percentile', percentile);
      charts.setPercentile(percentile);
    });
  }
}

async function boot() {
  show('charts-unavailable', !charts.available);
  charts.update([]); // empty axes until the history arrives
  wireTokenForm();
  wireLatencyToggle();
  onAuthFailure(authFailed);
  setInterval(updateLive, 1000);
  status('connecting…');
  page.access = await loadAccess();
  start(page.access);
}

boot();
