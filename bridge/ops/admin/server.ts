// Admin HTTP (HTTP_PORT): /healthz, /readyz, /metrics (Prometheus), and the operator API under
// /v1/ behind `Authorization: Bearer ADMIN_TOKEN` (every /v1/ path is 404 while ADMIN_TOKEN is
// unset). Routes:
//   GET    /v1/dlq?limit=&after=            a page of dead letters (after: the page before's `next`)
//   GET    /v1/dlq/{deviceId}/{id}          one dead letter with its request
//   POST   /v1/dlq/replay                   replay every dead letter
//   POST   /v1/dlq/{deviceId}/{id}/replay   replay one (its job key is deviceId/id; 404 if not listed)
//   DELETE /v1/dlq                          purge the dead-letter list
//   GET    /v1/usage?hours=N                tokens and cost of the last N hours (default 24, at most 192)
//   GET    /v1/devices                      MQTT clients connected to this instance, by device
//   GET    /v1/budgets                      each CONFIG_FILE budget's use in its current period
// The operator dashboard: the page at / and /dashboard/ (dashboard/http.ts); its data under
// /dashboard/api/ is open without a token only while ADMIN_TOKEN is unset and HTTP_HOST is
// loopback; its actions are the /v1/ routes above.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listen } from '../../../contract/listen.js';
import type { Logger } from '../../logger.js';
import { HttpError } from '../../../contract/index.js';
import { isLoopback } from '../../config/config.js';
import type { Readiness } from '../readiness.js';
import { operatorApi, type AdminApi, type Only } from './v1.js';
import { isDashboardPath, sendAccess, serveApi, serveFile, type DashboardApi } from '../dashboard/http.js';

export { MAX_USAGE_HOURS, type AdminApi } from './v1.js';

export interface AdminServer {
  readonly port: number;
  close(): Promise<void>;
}

export interface AdminOptions {
  host: string;
  port: number;
  /** ADMIN_TOKEN; undefined turns /v1/ off (404). */
  adminToken: string | undefined;
  readiness(httpPort: number): Readiness;
  metrics: { readonly contentType: string; render(): Promise<string> };
  api: AdminApi;
  /** The dashboard's data; undefined: no dashboard (404). */
  dashboard?: DashboardApi | undefined;
  logger: Logger;
}

/** What every request of one admin server sees. */
interface Admin {
  readonly options: AdminOptions;
  /** The digest of ADMIN_TOKEN, or undefined while it is unset. */
  readonly expectedToken: Buffer | undefined;
  /** The bound port, once listening (HTTP_PORT may be 0). */
  port: number;
}

type Endpoint = (admin: Admin, res: ServerResponse) => void | Promise<void>;

/** The routes outside /v1; each answers GET and HEAD. */
const ENDPOINTS = new Map<string, Endpoint>([
  ['/healthz', (_admin, res) => sendJson(res, 200, { ok: true })],
  [
    '/readyz',
    (admin, res) => {
      const state = admin.options.readiness(admin.port);
      sendJson(res, state.ready ? 200 : 503, state);
    },
  ],
  [
    '/metrics',
    async (admin, res) => {
      const text = await admin.options.metrics.render();
      res.writeHead(200, { 'content-type': admin.options.metrics.contentType }).end(text);
    },
  ],
]);

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

export async function startAdmin(options: AdminOptions): Promise<AdminServer> {
  const admin: Admin = {
    options,
    expectedToken: options.adminToken === undefined ? undefined : digest(options.adminToken),
    port: options.port,
  };
  const server: Server = createServer((req, res) => {
    route(admin, req, res).catch((err: unknown) => sendError(admin, req, res, err));
  });
  admin.port = await listen(server, options.host, options.port, 'HTTP_PORT', 'admin HTTP');
  return {
    port: admin.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function route(admin: Admin, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://admin');
  const path = url.pathname;
  const method = req.method ?? 'GET';
  const only: Only = (...allowed) => {
    if (!allowed.includes(method)) throw new HttpError(405, 'method not allowed', { allow: allowed.join(', ') });
  };
  const endpoint = ENDPOINTS.get(path);
  if (endpoint) {
    only('GET', 'HEAD');
    return endpoint(admin, res);
  }
  if (isDashboardPath(path)) return dashboard(admin, req, res, url, only);
  if (path === '/v1' || path.startsWith('/v1/')) {
    checkToken(admin, req);
    return sendJson(res, 200, await operatorApi(admin.options.api, path, url.searchParams, method, only));
  }
  throw new HttpError(404, 'not found');
}

async function dashboard(admin: Admin, req: IncomingMessage, res: ServerResponse, url: URL, only: Only): Promise<void> {
  const api = admin.options.dashboard;
  if (!api) throw new HttpError(404, 'not found');
  const path = url.pathname;
  if (path === '/dashboard/api/access') {
    only('GET');
    return sendAccess(api.access, res);
  }
  if (path.startsWith('/dashboard/api/')) {
    only('GET');
    if (admin.expectedToken) checkToken(admin, req);
    else if (!api.access.open) throw new HttpError(403, 'set ADMIN_TOKEN to see the dashboard from another host than this one');
    // Open reads answer only a page that names a loopback host: a site that rebinds its own
    // name to 127.0.0.1 cannot read them from the operator's browser.
    else if (!isLoopback(hostName(req.headers.host))) throw new HttpError(403, 'open the dashboard at http://127.0.0.1 (or localhost)');
    return serveApi(api, path, url.searchParams, req, res);
  }
  only('GET', 'HEAD');
  serveFile(path, res);
}

/** The Host header without its port (and an IPv6 address without its brackets). */
function hostName(host: string | undefined): string {
  const name = (host ?? '').replace(/:\d+$/, '');
  return name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
}

/** /v1 is not found without ADMIN_TOKEN, and unauthorized without the right bearer token. */
function checkToken(admin: Admin, req: IncomingMessage): void {
  if (!admin.expectedToken) throw new HttpError(404, 'not found');
  if (!bearerMatches(req.headers.authorization, admin.expectedToken)) {
    throw new HttpError(401, 'missing or wrong bearer token', { 'www-authenticate': 'Bearer realm="edge-ai-bridge"' });
  }
}

/** Constant-time: both sides are hashed to the same length first, so not even the length leaks. */
function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  const given = digest(match?.[1]?.trim() ?? '');
  return timingSafeEqual(given, expected) && match !== null;
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** An HttpError becomes its status and message; anything else is logged and answered 500. */
function sendError(admin: Admin, req: IncomingMessage, res: ServerResponse, err: unknown): void {
  if (res.headersSent) return void res.end();
  if (err instanceof HttpError) return sendJson(res, err.status, { error: err.message }, err.headers);
  admin.options.logger.error({ err, method: req.method, path: req.url?.split('?')[0] }, 'admin request failed');
  sendJson(res, 500, { error: 'internal error' });
}
