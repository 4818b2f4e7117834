// Shared setup of the upstream client tests: a scripted HTTP upstream (each request gets the
// next step; the last step repeats) and clients of it, all closed after each test.
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../../bridge/logger.js';
import { UpstreamClient, type UpstreamCall, type UpstreamClientOptions } from '../../bridge/upstream/client.js';

export interface Step {
  status?: number;
  headers?: Record<string, string>;
  /** JSON-encoded unless a string; defaults to a valid completion. */
  body?: unknown;
  delayMs?: number;
  /** Never answer. */
  hang?: boolean;
  /** Send the headers and part of the body, then stall. */
  stall?: boolean;
}

export interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
  at: number;
}

export interface Scripted {
  url: string;
  seen: Seen[];
  close: () => Promise<void>;
}

function completion(content = 'No scratch found.'): unknown {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: 'gpt-4o-mini-2024-07-18',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 21, completion_tokens: 5, total_tokens: 26 },
  };
}

export function failure(status: number, message: string, extra: Partial<Step> = {}): Step {
  return { status, body: { error: { message, type: 'server_error' } }, ...extra };
}

const servers: Scripted[] = [];
const clients: UpstreamClient[] = [];

/** For afterEach: closes the clients and upstreams the test made. */
export async function closeClientsAndUpstreams(): Promise<void> {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
}

export async function scripted(steps: Step[]): Promise<Scripted> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const step = steps[Math.min(seen.length, steps.length - 1)] ?? {};
      const raw = Buffer.concat(chunks).toString('utf8');
      seen.push({ path: req.url ?? '', headers: req.headers, body: raw === '' ? undefined : JSON.parse(raw), at: Date.now() });
      if (step.hang) return;
      if (step.stall) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"choices":[');
        return;
      }
      const send = (): void => {
        const body = typeof step.body === 'string' ? step.body : JSON.stringify(step.body ?? completion());
        res.writeHead(step.status ?? 200, { 'content-type': 'application/json', ...step.headers });
        res.end(body);
      };
      if (step.delayMs) setTimeout(send, step.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const handle: Scripted = {
    url: `http://127.0.0.1:${port}/v1`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(handle);
  return handle;
}

export function client(url: string, opts: Partial<UpstreamClientOptions> = {}): UpstreamClient {
  const c = new UpstreamClient({
    baseUrl: url,
    apiKeys: ['sk-test-one'],
    timeoutMs: 2000,
    maxAttempts: 3,
    maxRateLimitedRetries: 10,
    backoff: { baseMs: 10, maxMs: 50 },
    logger: createLogger('silent'),
    ...opts,
  });
  clients.push(c);
  return c;
}

export function call(extra: Partial<UpstreamCall> = {}): UpstreamCall {
  return {
    requestId: 'r-1',
    deviceId: 'cam-1',
    priority: 'normal',
    requestedModel: undefined,
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] },
    ...extra,
  };
}
