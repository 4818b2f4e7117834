// Shared setup of the provider-chain tests: upstream simulators on free ports, a port nobody
// listens on, and chains with a fast in-memory breaker, all closed after each test.
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { expect } from 'vitest';
import { BridgeError } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { MemoryBreakerStore } from '../../bridge/upstream/breaker-memory.js';
import type { UpstreamCall } from '../../bridge/upstream/call.js';
import { ProviderChain, type ProviderChainOptions } from '../../bridge/upstream/chain.js';
import type { ProviderOptions } from '../../bridge/upstream/provider.js';
import { startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../upstream-sim/sim.js';

const sims: UpstreamSim[] = [];
const chains: ProviderChain[] = [];

/** For afterEach: closes the chains and simulators the test made. */
export async function closeChainsAndSims(): Promise<void> {
  await Promise.all(chains.splice(0).map((c) => c.close()));
  await Promise.all(sims.splice(0).map((s) => s.close()));
}

export async function sim(opts: Partial<UpstreamSimOptions> = {}): Promise<UpstreamSim> {
  const s = await startUpstreamSim({ port: 0, latencyMs: 2, ...opts });
  sims.push(s);
  return s;
}

/**
 * A URL on which nothing listens: connections are refused at once. Its port lies below the
 * kernel's ephemeral range, where every port-0 listener of the tests draws from, so a server
 * of a test running beside this one cannot take it and answer instead.
 */
export async function closedPortUrl(): Promise<string> {
  const below = ephemeralLow();
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * (below - 10_000));
    if (await refuses(port)) return `http://127.0.0.1:${port}/v1`;
  }
}

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return low > 10_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

export const provider = (name: string, baseUrl: string, extra: Partial<ProviderOptions> = {}): ProviderOptions => ({
  name,
  baseUrl,
  apiKeys: [`sk-${name}-0001`],
  timeoutMs: 1000,
  ...extra,
});

export const COOLDOWN_MS = 600;

export function chain(providers: ProviderOptions[], extra: Partial<ProviderChainOptions> = {}): ProviderChain {
  const c = new ProviderChain({
    providers,
    breaker: { store: new MemoryBreakerStore(), consecutiveFailures: 2, errorRate: 1, windowMs: 10_000, minCalls: 100, cooldownMs: COOLDOWN_MS },
    maxAttempts: 3,
    maxRateLimitedRetries: 10,
    backoff: { baseMs: 5, maxMs: 20 },
    logger: createLogger('silent'),
    ...extra,
  });
  chains.push(c);
  return c;
}

let seq = 0;
export function call(extra: Partial<UpstreamCall> = {}): UpstreamCall {
  seq += 1;
  return {
    requestId: `r-${seq}`,
    deviceId: 'cam-1',
    priority: 'normal',
    requestedModel: undefined,
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `question ${seq}` }] },
    ...extra,
  };
}

/** The BridgeError a call failed with (the test fails if it succeeded or threw something else). */
export async function failureOf(promise: Promise<unknown>): Promise<BridgeError> {
  const err = await promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BridgeError);
  return err as BridgeError;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
export const modelsSeen = (s: UpstreamSim): unknown[] => s.requests.map((r) => (r.body as { model: unknown }).model);
