// Admin HTTP: health and readiness now; /metrics and /v1/ arrive with issue 5.
import { createServer, type Server } from 'node:http';
import { listen } from '../broker/broker.js';

export interface Readiness {
  ready: boolean;
  ports: { mqtt: number; http: number };
  [detail: string]: unknown;
}

export interface AdminServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startAdmin(host: string, port: number, readiness: (httpPort: number) => Readiness): Promise<AdminServer> {
  let boundPort = port;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (req.method !== 'GET') return send(405, { error: 'method not allowed' });
    if (path === '/healthz') return send(200, { ok: true });
    if (path === '/readyz') {
      const state = readiness(boundPort);
      return send(state.ready ? 200 : 503, state);
    }
    send(404, { error: 'not found' });
  });
  boundPort = await listen(server, host, port, 'HTTP_PORT', 'admin HTTP');
  return {
    port: boundPort,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
