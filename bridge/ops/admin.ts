// Admin HTTP (HTTP_PORT): /healthz, /readyz, /metrics (Prometheus), and the operator API under
// /v1/ behind `Authorization: Bearer ADMIN_TOKEN` (every /v1/ path is 404 while ADMIN_TOKEN is
// unset). Routes:
//   GET    /v1/dlq                          dead letters
//   POST   /v1/dlq/replay                   replay every dead letter
//   POST   /v1/dlq/{deviceId}/{id}/replay   replay one (its job key is deviceId/id; 404 if not listed)
//   DELETE /v1/dlq                          purge the dead-letter list
//   GET    /v1/usage?hours=N                tokens and cost of the last N hours (default 24, at most 192)
//   GET    /v1/devices                      MQTT clients connected to this instance, by device
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listen } from '../../broker/broker.js';
import type { Logger } from '../logger.js';
import type { DeadLetter, UsageReport } from '../store/types.js';
import { HttpError } from '../../contract/index.js';

export interface Readiness {
  ready: boolean;
  /** Bound ports; MQTT ones only for the listeners of an embedded broker. */
  ports: { http: number; mqtt?: number; mqttTls?: number; mqttWs?: number };
  [detail: string]: unknown;
}

export interface AdminServer {
  readonly port: number;
  close(): Promise<void>;
}

/** What the operator API reaches; the composition root binds it to the store and broker. */
export interface AdminApi {
  deadLetters(): Promise<DeadLetter[]>;
  /** Replays the dead letters of `keys` (`deviceId/id`) or all; returns how many. */
  replay(keys: string[] | 'all'): Promise<number>;
  purge(): Promise<number>;
  usage(hours: number): Promise<UsageReport>;
  devices(): Array<{ deviceId: string | null; clientIds: string[] }>;
}

export interface AdminOptions {
  host: string;
  port: number;
  /** ADMIN_TOKEN; undefined turns /v1/ off (404). */
  adminToken: string | undefined;
  readiness(httpPort: number): Readiness;
  metrics: { readonly contentType: string; render(): Promise<string> };
  api: AdminApi;
  logger: Logger;
}

/** Usage is kept about 8 days. */
export const MAX_USAGE_HOURS = 192;
const SEGMENT = /^[A-Za-z0-9._:-]{1,128}$/;

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

/** Constant-time: both sides are hashed to the same length first, so not even the length leaks. */
function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer (.+)$/i.exec(header ?? '');
  const given = digest(match?.[1]?.trim() ?? '');
  return timingSafeEqual(given, expected) && match !== null;
}

export async function startAdmin(options: AdminOptions): Promise<AdminServer> {
  let boundPort = options.port;
  const expectedToken = options.adminToken === undefined ? undefined : digest(options.adminToken);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://admin');
    const path = url.pathname;
    const method = req.method ?? 'GET';
    const send = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    };
    const only = (...allowed: string[]): void => {
      if (!allowed.includes(method)) throw new HttpError(405, 'method not allowed', { allow: allowed.join(', ') });
    };

    if (path === '/healthz') {
      only('GET', 'HEAD');
      return send(200, { ok: true });
    }
    if (path === '/readyz') {
      only('GET', 'HEAD');
      const state = options.readiness(boundPort);
      return send(state.ready ? 200 : 503, state);
    }
    if (path === '/metrics') {
      only('GET', 'HEAD');
      const text = await options.metrics.render();
      res.writeHead(200, { 'content-type': options.metrics.contentType }).end(text);
      return;
    }
    if (path === '/v1' || path.startsWith('/v1/')) {
      if (!expectedToken) throw new HttpError(404, 'not found');
      if (!bearerMatches(req.headers.authorization, expectedToken)) {
        throw new HttpError(401, 'missing or wrong bearer token', { 'www-authenticate': 'Bearer realm="edge-ai-bridge"' });
      }
      return send(200, await v1(path, url.searchParams, method, only));
    }
    throw new HttpError(404, 'not found');
  };

  const v1 = async (
    path: string,
    query: URLSearchParams,
    method: string,
    only: (...allowed: string[]) => void,
  ): Promise<unknown> => {
    const { api } = options;
    const segments = path.split('/').slice(2).map(decodeSegment); // after "", "v1"
    const [first, second, third, fourth] = segments;
    if (first === 'dlq' && segments.length === 1) {
      only('GET', 'DELETE');
      if (method === 'DELETE') return { purged: await api.purge() };
      const entries = await api.deadLetters();
      return {
        count: entries.length,
        entries: entries.map(({ job, reply, atMs }) => ({
          key: job.key,
          deviceId: job.deviceId,
          id: job.id,
          priority: job.priority,
          at: new Date(atMs).toISOString(),
          error: reply.ok ? undefined : reply.error,
          request: job.request,
        })),
      };
    }
    if (first === 'dlq' && second === 'replay' && segments.length === 2) {
      only('POST');
      return { replayed: await api.replay('all') };
    }
    if (first === 'dlq' && segments.length === 4 && fourth === 'replay' && second && third) {
      only('POST');
      const key = `${second}/${third}`;
      const replayed = await api.replay([key]);
      if (replayed === 0) throw new HttpError(404, `no dead letter ${key}`);
      return { replayed };
    }
    if (first === 'usage' && segments.length === 1) {
      only('GET');
      const raw = query.get('hours');
      const hours = raw === null ? 24 : Number(raw);
      if (!Number.isInteger(hours) || hours < 1 || hours > MAX_USAGE_HOURS) {
        throw new HttpError(400, `hours must be an integer from 1 to ${MAX_USAGE_HOURS}`);
      }
      return { hours, ...(await api.usage(hours)) };
    }
    if (first === 'devices' && segments.length === 1) {
      only('GET');
      const devices = api.devices();
      return { count: devices.length, devices };
    }
    throw new HttpError(404, 'not found');
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.end();
      if (err instanceof HttpError) {
        res.writeHead(err.status, { 'content-type': 'application/json', ...err.headers }).end(JSON.stringify({ error: err.message }));
      } else {
        options.logger.error({ err, method: req.method, path: req.url?.split('?')[0] }, 'admin request failed');
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'internal error' }));
      }
    });
  });
  boundPort = await listen(server, options.host, options.port, 'HTTP_PORT', 'admin HTTP');
  return {
    port: boundPort,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function decodeSegment(segment: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'bad percent-encoding in the path');
  }
  if (!SEGMENT.test(decoded)) throw new HttpError(404, 'not found');
  return decoded;
}
