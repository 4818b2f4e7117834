// An OpenAI-compatible upstream for tests, the demo and benchmarks: deterministic answers,
// configurable latency, and fault injection (errors, 429s with Retry-After, hangs, slow
// bodies, malformed JSON, revoked keys) either at random rates or scripted one request at a
// time; GET /stats counts calls by status, path, model and key.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FaultStep } from './faults.js';
import { applyOptions, settingsFrom, type UpstreamSimOptions } from './options.js';
import { handleRequest } from './routes.js';
import { createState, resetState, type RecordedRequest, type SimState } from './state.js';
import type { SimStats } from './stats.js';

export { simEmbedding } from './embeddings.js';
export type { FaultStep } from './faults.js';
export { checkUpstreamSimOptions, type UpstreamSimOptions } from './options.js';
export type { RecordedRequest } from './state.js';
export type { SimStats } from './stats.js';

export interface UpstreamSim {
  /** Base URL ending in /v1, e.g. http://127.0.0.1:PORT/v1 */
  url: string;
  port: number;
  /** Every chat/embeddings request received, in arrival order. */
  requests: RecordedRequest[];
  stats(): SimStats;
  /**
   * Resolves once `requests` holds `count` calls (each recorded as it arrives, before it is
   * answered); rejects after `timeoutMs`. For tests that must know a call has started.
   */
  requested(count: number, timeoutMs?: number): Promise<void>;
  script(...steps: FaultStep[]): void;
  setOptions(partial: Partial<Omit<UpstreamSimOptions, 'port' | 'host'>>): void;
  /** Forgets requests, stats, queued script steps and the rate window; options stay. */
  reset(): void;
  close(): Promise<void>;
}

export async function startUpstreamSim(opts: UpstreamSimOptions): Promise<UpstreamSim> {
  const state = createState(settingsFrom(opts));
  const server: Server = createServer((req, res) => handleRequest(state, req, res));
  await listen(server, state.settings.port, state.settings.host);
  const port = (server.address() as AddressInfo).port;
  const hostForUrl = state.settings.host.includes(':') ? `[${state.settings.host}]` : state.settings.host;
  return {
    url: `http://${hostForUrl}:${port}/v1`,
    port,
    requests: state.requests,
    stats: () => structuredClone(state.stats),
    requested: (count, timeoutMs = 5000) => requested(state, count, timeoutMs),
    script: (...more) => {
      state.steps.push(...more);
    },
    setOptions: (partial) => applyOptions(state.settings, partial),
    reset: () => resetState(state),
    close: () => close(state, server),
  };
}

function requested(state: SimState, count: number, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (state.requests.length < count) return;
      state.arrivals.delete(check);
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      state.arrivals.delete(check);
      reject(new Error(`upstream-sim: ${state.requests.length}/${count} calls after ${timeoutMs} ms`));
    }, timeoutMs);
    state.arrivals.add(check);
    check();
  });
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function close(state: SimState, server: Server): Promise<void> {
  if (state.closed) return;
  state.closed = true;
  for (const t of state.timers) clearTimeout(t);
  state.timers.clear();
  const done = new Promise<void>((resolve) => server.close(() => resolve()));
  // Hanging calls would otherwise hold close() open forever.
  server.closeAllConnections();
  await done;
}
