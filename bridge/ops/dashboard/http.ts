// The dashboard over the admin HTTP: the page at `/`, its static files under /dashboard/, and
// its read-only API under /dashboard/api/ (actions stay on /v1/, behind the token). Every
// answer carries a strict Content-Security-Policy: the page loads nothing from elsewhere and
// runs no inline script.
import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import { HttpError } from '../../../contract/index.js';
import type { DeadLetter, DeadLetterPage } from '../../store/port.js';
import { pageQuery } from '../page-query.js';
import type { Dashboard, DashboardEvent } from './dashboard.js';
import type { AccessView, DeadLetterView, DeviceView, UsageView } from './model.js';

export interface DashboardApi {
  dashboard: Dashboard;
  access: AccessView;
  usage(): Promise<UsageView>;
  devices(query: string): Promise<DeviceView[]>;
  /** A page of dead letters after the cursor, and how many are kept in all. */
  deadLetters(limit: number, after: string | undefined): Promise<DeadLetterPage & { count: number }>;
  deadLetter(key: string): Promise<DeadLetter | undefined>;
}

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};
const MAX_QUERY_CHARS = 128;
/** Dead letters per page the dashboard reads: by default, and at most. */
const DLQ_PAGE = { default: 50, max: 200 };
/** Event streams open at once, every page and script together: each holds a socket and a listener. */
export const MAX_EVENT_STREAMS = 32;
/** What a stream whose reader stopped reading may have waiting in its socket before it is closed. */
const MAX_STREAM_BACKLOG_BYTES = 1_048_576;
/** When a refused stream may try again (Retry-After, seconds). */
const STREAM_RETRY_AFTER_S = 10;

/** The page's files, read once: the static folder beside this module and uPlot's build. */
function loadFiles(): Map<string, { type: string; body: Buffer }> {
  const dir = new URL('./static/', import.meta.url);
  const files = new Map<string, { type: string; body: Buffer }>();
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type) files.set(`/dashboard/${name}`, { type, body: readFileSync(new URL(name, dir)) });
  }
  const require = createRequire(import.meta.url);
  for (const name of ['uPlot.iife.min.js', 'uPlot.min.css']) {
    files.set(`/dashboard/${name}`, { type: TYPES[extname(name)] as string, body: readFileSync(require.resolve(`uplot/dist/${name}`)) });
  }
  const index = files.get('/dashboard/index.html');
  if (index) files.set('/', index);
  return files;
}

let files: ReturnType<typeof loadFiles> | undefined;

/** Whether `path` is the dashboard's: `/`, /dashboard/… */
export const isDashboardPath = (path: string): boolean => path === '/' || path === '/dashboard' || path.startsWith('/dashboard/');

/** A static file; no token (the page holds no data). */
export function serveFile(path: string, res: ServerResponse): void {
  files ??= loadFiles();
  const file = files.get(path);
  if (!file) throw new HttpError(404, 'not found');
  res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': file.type, 'cache-control': 'no-cache' }).end(file.body);
}

/** /dashboard/api/…, the caller allowed to read. */
export async function serveApi(api: DashboardApi, path: string, query: URLSearchParams, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const [name, ...rest] = path.slice('/dashboard/api/'.length).split('/');
  if (name === 'events' && rest.length === 0) return openEvents(api.dashboard, req, res);
  if (name === 'usage' && rest.length === 0) return sendJson(res, await api.usage());
  if (name === 'devices' && rest.length === 0) return sendJson(res, { devices: await api.devices(searchText(query)) });
  if (name === 'dlq' && rest.length === 0) {
    const { limit, after } = pageQuery(query, DLQ_PAGE);
    const page = await api.deadLetters(limit, after);
    return sendJson(res, { count: page.count, entries: page.entries.map(deadLetterView), next: page.next ?? null });
  }
  if (name === 'dlq' && rest.length === 2) return sendJson(res, { entry: await deadLetter(api, rest.map(decode).join('/')) });
  throw new HttpError(404, 'not found');
}

export function sendAccess(access: AccessView, res: ServerResponse): void {
  sendJson(res, access);
}

function sendJson(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
}

function searchText(query: URLSearchParams): string {
  const q = (query.get('q') ?? '').trim();
  if (q.length === 0) throw new HttpError(400, 'q: give part of a device id');
  if (q.length > MAX_QUERY_CHARS) throw new HttpError(400, `q: at most ${MAX_QUERY_CHARS} characters`);
  return q;
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'bad percent-encoding in the path');
  }
}

function deadLetterView({ job, reply, atMs }: DeadLetter): DeadLetterView {
  return {
    key: job.key,
    deviceId: job.deviceId,
    id: job.id,
    priority: job.priority,
    at: new Date(atMs).toISOString(),
    error: reply.ok ? null : { code: reply.error.code, message: reply.error.message },
    attempts: job.attempts,
  };
}

/** One dead letter with its request: asked for explicitly, so prompt text shows only then. */
async function deadLetter(api: DashboardApi, key: string): Promise<DeadLetterView & { request: unknown }> {
  const found = await api.deadLetter(key);
  if (!found) throw new HttpError(404, `no dead letter ${key}`);
  return { ...deadLetterView(found), request: found.job.request };
}

/**
 * Server-sent events: the history, the latest tick, then every tick until the page goes. At most
 * MAX_EVENT_STREAMS at once (503 with Retry-After beyond), and a stream whose reader does not
 * keep up is closed rather than buffered without end.
 */
function openEvents(dashboard: Dashboard, req: IncomingMessage, res: ServerResponse): void {
  if (dashboard.streams >= MAX_EVENT_STREAMS) {
    throw new HttpError(503, `too many dashboard event streams open (at most ${MAX_EVENT_STREAMS})`, { 'retry-after': String(STREAM_RETRY_AFTER_S) });
  }
  res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
  const send = ({ name, data }: { name: string; data: unknown }): void => {
    if (res.writableLength > MAX_STREAM_BACKLOG_BYTES) return void res.destroy();
    res.write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  send({ name: 'history', data: dashboard.history() });
  const latest = dashboard.latest();
  if (latest) send({ name: 'tick', data: latest });
  const unsubscribe = dashboard.subscribe((event: DashboardEvent) => send(event));
  req.on('close', unsubscribe);
  res.on('close', unsubscribe);
}
