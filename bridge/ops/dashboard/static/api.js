// The admin token and JSON requests to the bridge. The token lives in this module (and in
// sessionStorage for a reload of the tab); it is only ever sent as an Authorization header.

const STORAGE_KEY = 'edge-ai-bridge.dashboard.token';

let token = readStored();
let authFailureListener = () => {};

function readStored() {
  try {
    return sessionStorage.getItem(STORAGE_KEY) ?? '';
  } catch {
    return '';
  }
}

export const getToken = () => token;

export function setToken(value) {
  token = String(value ?? '').trim();
  try {
    if (token) sessionStorage.setItem(STORAGE_KEY, token);
    else sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // storage off: the variable is enough
  }
}

/** Called with the ApiError of any read answered 401/403. */
export function onAuthFailure(listener) {
  authFailureListener = listener;
}

export function authHeaders(extra = {}) {
  return token ? { ...extra, Authorization: `Bearer ${token}` } : { ...extra };
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }

  get isAuth() {
    return this.status === 401 || this.status === 403;
  }
}

export const isAbort = (err) => err?.name === 'AbortError';

/**
 * Fetches JSON. options: method, signal, action (an operator action: a 401 is reported to the
 * caller only, not to the page's token prompt). Throws ApiError (status 0 when unreachable).
 */
export async function requestJson(path, options = {}) {
  let res;
  try {
    res = await fetch(path, {
      method: options.method ?? 'GET',
      headers: authHeaders({ Accept: 'application/json' }),
      signal: options.signal,
      cache: 'no-store',
    });
  } catch (err) {
    if (isAbort(err)) throw err;
    throw new ApiError(0, 'bridge unreachable');
  }
  const body = await readJson(res);
  if (res.ok) return body;
  const err = new ApiError(res.status, errorMessage(res.status, body));
  if (err.isAuth && !options.action) authFailureListener(err);
  throw err;
}

async function readJson(res) {
  const text = await res.text().catch(() => '');
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function errorMessage(status, body) {
  if (status === 401 || status === 403) return 'token required or wrong';
  if (body && typeof body.error === 'string') return body.error;
  return `HTTP ${status}`;
}

/** A path segment, percent-encoded. */
export const seg = (value) => encodeURIComponent(String(value));
