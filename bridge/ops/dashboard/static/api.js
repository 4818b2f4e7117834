// @ts-check
// The admin token and JSON requests to the bridge. The token lives in this module (and in
// sessionStorage for a reload of the tab); it is only ever sent as an Authorization header.

const STORAGE_KEY = 'edge-ai-bridge.dashboard.token';

let token = readStored();
/** @type {(err: ApiError) => void} */
let authFailureListener = () => {};

function readStored() {
  try {
    return sessionStorage.getItem(STORAGE_KEY) ?? '';
  } catch {
    return '';
  }
}

export const getToken = () => token;

/** @param {unknown} value */
export function setToken(value) {
  token = String(value ?? '').trim();
  try {
    if (token) sessionStorage.setItem(STORAGE_KEY, token);
    else sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // storage off: the variable is enough
  }
}

/**
 * Called with the ApiError of any read answered 401/403.
 * @param {(err: ApiError) => void} listener
 */
export function onAuthFailure(listener) {
  authFailureListener = listener;
}

/**
 * @param {Record<string, string>} [extra]
 * @returns {Record<string, string>}
 */
export function authHeaders(extra = {}) {
  return token ? { ...extra, Authorization: `Bearer ${token}` } : { ...extra };
}

export class ApiError extends Error {
  /**
   * @param {number} status 0 when the bridge did not answer
   * @param {string} message
   */
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }

  get isAuth() {
    return this.status === 401 || this.status === 403;
  }
}

/** @param {unknown} err */
export const isAbort = (err) => err instanceof Error && err.name === 'AbortError';

/**
 * What the page says about a failure: requestJson throws only ApiErrors and aborts.
 * @param {unknown} err
 */
export const messageOf = (err) => (err instanceof Error ? err.message : String(err));

/**
 * Fetches JSON. options: method, signal, action (an operator action: a 401 is reported to the
 * caller only, not to the page's token prompt). Throws ApiError (status 0 when unreachable).
 * Resolves to the body (null when empty or not JSON); the caller names its shape from ../model.ts.
 * @param {string} path
 * @param {{ method?: string; signal?: AbortSignal; action?: boolean }} [options]
 * @returns {Promise<unknown>}
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

/**
 * @param {Response} res
 * @returns {Promise<unknown>}
 */
async function readJson(res) {
  const text = await res.text().catch(() => '');
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * @param {number} status
 * @param {unknown} body
 */
function errorMessage(status, body) {
  if (status === 401 || status === 403) return 'token required or wrong';
  if (body && typeof body === 'object' && 'error' in body && typeof body.error === 'string') return body.error;
  return `HTTP ${status}`;
}

/**
 * A path segment, percent-encoded.
 * @param {unknown} value
 */
export const seg = (value) => encodeURIComponent(String(value));
