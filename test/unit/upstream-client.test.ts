import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { logSink } from '../helpers/log-sink.js';
import { afterEach, describe, expect, it } from 'vitest';
import { BridgeError, type InferRequest } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { buildUpstreamBody } from '../../bridge/upstream/body.js';
import { UpstreamClient, type UpstreamCall, type UpstreamClientOptions } from '../../bridge/upstream/client.js';
import { exchange, type Exchange } from '../../bridge/upstream/exchange.js';
import { Pool } from 'undici';

// --- a scripted upstream: each request gets the next step; the last step repeats ---------

interface Step {
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

interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
  body: unknown;
  at: number;
}

interface Scripted {
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

function failure(status: number, message: string, extra: Partial<Step> = {}): Step {
  return { status, body: { error: { message, type: 'server_error' } }, ...extra };
}

const servers: Scripted[] = [];
const clients: UpstreamClient[] = [];

async function scripted(steps: Step[]): Promise<Scripted> {
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

function client(url: string, opts: Partial<UpstreamClientOptions> = {}): UpstreamClient {
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

function call(extra: Partial<UpstreamCall> = {}): UpstreamCall {
  return {
    requestId: 'r-1',
    deviceId: 'cam-1',
    priority: 'normal',
    requestedModel: undefined,
    body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] },
    ...extra,
  };
}

async function failureOf(promise: Promise<unknown>): Promise<BridgeError> {
  const err = await promise.then(
    () => {
      throw new Error('expected the call to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BridgeError);
  return err as BridgeError;
}

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

// --- tests -------------------------------------------------------------------------------

describe('buildUpstreamBody', () => {
  it('keeps model, messages and passthrough fields only', () => {
    const request: InferRequest = {
      id: 'r-9',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 5,
      seed: 7,
      lock: 'line-3',
      ttl_ms: 100,
      cache: false,
    };
    expect(buildUpstreamBody(request, 'default-model')).toEqual({
      model: 'default-model',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 5,
      seed: 7,
    });
    expect(buildUpstreamBody({ ...request, model: 'm2' }, 'default-model').model).toBe('m2');
  });
});

describe('UpstreamClient', () => {
  it('posts to {baseUrl}/chat/completions with key, body and extra headers', async () => {
    const up = await scripted([{}]);
    const request: InferRequest = {
      id: 'r-1',
      messages: [{ role: 'user', content: 'Is there a scratch?' }],
      max_tokens: 256,
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n'],
      response_format: { type: 'json_object' },
      seed: 42,
      lock: 'line-3/robot-arm',
      ttl_ms: 5000,
      cache: true,
    };
    const startedAt = performance.now();
    const result = await client(up.url).call(
      call({ body: buildUpstreamBody(request, 'gpt-4o-mini'), headers: { 'X-Lock-Key': 'line-3/robot-arm', 'X-Lock-Fence': '17' } }),
    );
    const elapsedMs = performance.now() - startedAt;

    expect(result).toMatchObject({
      model: 'gpt-4o-mini-2024-07-18',
      content: 'No scratch found.',
      finish_reason: 'stop',
      usage: { prompt_tokens: 21, completion_tokens: 5, total_tokens: 26 },
      attempts: 1,
    });
    // The upstream's own time: within the call, not made up.
    expect(result.upstreamMs).toBeGreaterThanOrEqual(0);
    expect(result.upstreamMs).toBeLessThanOrEqual(elapsedMs + 1);
    expect(up.seen).toHaveLength(1);
    const [seen] = up.seen;
    expect(seen?.path).toBe('/v1/chat/completions');
    expect(seen?.headers['authorization']).toBe('Bearer sk-test-one');
    expect(seen?.headers['content-type']).toBe('application/json');
    expect(seen?.headers['x-lock-key']).toBe('line-3/robot-arm');
    expect(seen?.headers['x-lock-fence']).toBe('17');
    expect(seen?.body).toEqual({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'Is there a scratch?' }],
      max_tokens: 256,
      temperature: 0.2,
      top_p: 0.9,
      stop: ['\n'],
      response_format: { type: 'json_object' },
      seed: 42,
    });
  });

  it('sends no Authorization header without keys and copes with a bare base URL', async () => {
    const up = await scripted([{}]);
    await client(up.url.replace('/v1', '/'), { apiKeys: [] }).call(call());
    expect(up.seen[0]?.path).toBe('/chat/completions');
    expect(up.seen[0]?.headers['authorization']).toBeUndefined();
  });

  it('rotates keys round-robin across calls', async () => {
    const up = await scripted([{}]);
    const c = client(up.url, { apiKeys: ['k1', 'k2'] });
    await c.call(call());
    await c.call(call());
    await c.call(call());
    expect(up.seen.map((s) => s.headers['authorization'])).toEqual(['Bearer k1', 'Bearer k2', 'Bearer k1']);
  });

  it('retries 5xx and reports the attempts used', async () => {
    const up = await scripted([failure(500, 'boom'), failure(503, 'busy'), {}]);
    const result = await client(up.url).call(call());
    expect(result.attempts).toBe(3);
    expect(up.seen).toHaveLength(3);
  });

  it('fails with upstream_error after maxAttempts of 5xx', async () => {
    const up = await scripted([failure(500, 'engine on fire')]);
    const err = await failureOf(client(up.url, { maxAttempts: 4 }).call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('500');
    expect(err.message).toContain('engine on fire');
    expect(up.seen).toHaveLength(4);
  });

  it('lets a call lower, but not raise, maxAttempts', async () => {
    const up = await scripted([failure(500, 'boom')]);
    const c = client(up.url, { maxAttempts: 3 });
    expect((await failureOf(c.call(call({ maxAttempts: 2 })))).code).toBe('upstream_error');
    expect(up.seen).toHaveLength(2);
    expect((await failureOf(c.call(call({ maxAttempts: 9 })))).code).toBe('upstream_error');
    expect(up.seen).toHaveLength(5);
  });

  it('counts a malformed or choiceless 200 as a failed attempt', async () => {
    const up = await scripted([{ body: 'not json' }, { body: { object: 'chat.completion' } }, {}]);
    const result = await client(up.url).call(call());
    expect(result.attempts).toBe(3);
    expect(result.content).toBe('No scratch found.');
  });

  it('honours Retry-After on 429 without using up an attempt', async () => {
    const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '1' } }), {}]);
    const rateLimited: number[] = [];
    const before: number[] = [];
    const result = await client(up.url, { maxAttempts: 1 }).call(
      call({
        onRateLimited: (ms) => rateLimited.push(ms),
        beforeAttempt: async (n) => {
          before.push(n);
        },
      }),
    );
    expect(result.attempts).toBe(1);
    expect(rateLimited).toEqual([1000]);
    expect(before).toEqual([1, 2]);
    expect(up.seen).toHaveLength(2);
    const gap = (up.seen[1]?.at ?? 0) - (up.seen[0]?.at ?? 0);
    expect(gap).toBeGreaterThanOrEqual(900);
  });

  it('moves to the next key after a 429', async () => {
    const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '0' } }), {}]);
    await client(up.url, { apiKeys: ['k1', 'k2'] }).call(call());
    expect(up.seen.map((s) => s.headers['authorization'])).toEqual(['Bearer k1', 'Bearer k2']);
  });

  it('fails with upstream_error once 429s exceed maxRateLimitedRetries', async () => {
    const up = await scripted([failure(429, 'slow down')]);
    let rateLimited = 0;
    const err = await failureOf(
      client(up.url, { maxRateLimitedRetries: 2 }).call(call({ onRateLimited: () => (rateLimited += 1) })),
    );
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('429');
    expect(up.seen).toHaveLength(3);
    expect(rateLimited).toBe(3);
  });

  it('treats a 429 for insufficient_quota as a dead key, not a wait', async () => {
    const quota: Step = { status: 429, body: { error: { message: 'You exceeded your quota', code: 'insufficient_quota' } } };
    const up = await scripted([quota, {}]);
    let rateLimited = 0;
    const result = await client(up.url, { apiKeys: ['k1', 'k2'] }).call(call({ onRateLimited: () => (rateLimited += 1) }));
    expect(result.attempts).toBe(2);
    expect(rateLimited).toBe(0);
    expect(up.seen.map((s) => s.headers['authorization'])).toEqual(['Bearer k1', 'Bearer k2']);
  });

  it('fails with upstream_timeout when every attempt hangs', async () => {
    const up = await scripted([{ hang: true }]);
    const started = Date.now();
    const err = await failureOf(client(up.url, { timeoutMs: 200, maxAttempts: 2 }).call(call()));
    expect(err.code).toBe('upstream_timeout');
    expect(up.seen).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(380);
  });

  it('times out a body that starts but never finishes', async () => {
    // Headers arrive at once, the body never ends: the per-attempt timeout must cover it.
    const up = await scripted([{ stall: true }]);
    const c = client(up.url, { timeoutMs: 200, maxAttempts: 1 });
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('upstream_timeout');
  });

  it('fails with upstream_error when only some attempts timed out', async () => {
    const up = await scripted([{ hang: true }, failure(502, 'bad gateway')]);
    const err = await failureOf(client(up.url, { timeoutMs: 200, maxAttempts: 2 }).call(call()));
    expect(err.code).toBe('upstream_error');
    expect(up.seen).toHaveLength(2);
  });

  it('fails at once on a 400, with the status and a truncated upstream message', async () => {
    const up = await scripted([failure(400, `bad messages ${'x'.repeat(1000)}`)]);
    const err = await failureOf(client(up.url).call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('400');
    expect(err.message).toContain('bad messages');
    expect(err.message.length).toBeLessThan(300);
    expect(up.seen).toHaveLength(1);
  });

  it('moves to the second key after a 401, counting an attempt', async () => {
    const up = await scripted([failure(401, 'invalid api key'), {}]);
    const result = await client(up.url, { apiKeys: ['k1', 'k2'] }).call(call());
    expect(result.attempts).toBe(2);
    expect(up.seen.map((s) => s.headers['authorization'])).toEqual(['Bearer k1', 'Bearer k2']);
  });

  it('fails at once on a 401 when no other key is left', async () => {
    const up = await scripted([failure(401, 'invalid api key')]);
    const err = await failureOf(client(up.url, { apiKeys: ['k1', 'k2'] }).call(call()));
    expect(err.code).toBe('upstream_error');
    expect(err.message).toContain('401');
    expect(up.seen).toHaveLength(2);
  });

  describe('deadline', () => {
    it('is expired when the deadline has already passed: nothing is sent', async () => {
      const up = await scripted([{}]);
      const err = await failureOf(client(up.url).call(call({ deadline: Date.now() - 1 })));
      expect(err.code).toBe('expired');
      expect(err.message).toContain('ttl_ms passed before an upstream call could start');
      expect(up.seen).toHaveLength(0);
    });

    it('is expired when a 429 wait would pass it, without sleeping', async () => {
      const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '1' } }), {}]);
      const started = Date.now();
      const err = await failureOf(client(up.url).call(call({ deadline: Date.now() + 300 })));
      expect(err.code).toBe('expired');
      expect(err.retryAfterMs).toBe(1000);
      expect(Date.now() - started).toBeLessThan(250);
      expect(up.seen).toHaveLength(1);
    });

    it('is expired when a 429 backoff (no Retry-After) would pass it', async () => {
      const up = await scripted([failure(429, 'slow down'), {}]);
      const c = client(up.url, { backoff: { baseMs: 1000, maxMs: 1000 }, random: () => 1 });
      const err = await failureOf(c.call(call({ deadline: Date.now() + 300 })));
      expect(err.code).toBe('expired');
      expect(up.seen).toHaveLength(1);
    });

    it('gives the last failure code once an attempt has run', async () => {
      const up = await scripted([failure(500, 'boom'), {}]);
      const c = client(up.url, { backoff: { baseMs: 1000, maxMs: 1000 }, random: () => 1 });
      const started = Date.now();
      const err = await failureOf(c.call(call({ deadline: Date.now() + 300 })));
      expect(err.code).toBe('upstream_error');
      expect(err.message).toContain('500');
      expect(Date.now() - started).toBeLessThan(250);
      expect(up.seen).toHaveLength(1);
    });

    it('gives upstream_timeout when the attempts that ran all timed out', async () => {
      const up = await scripted([{ hang: true }]);
      const c = client(up.url, { timeoutMs: 100, backoff: { baseMs: 1000, maxMs: 1000 }, random: () => 1 });
      const err = await failureOf(c.call(call({ deadline: Date.now() + 500 })));
      expect(err.code).toBe('upstream_timeout');
      expect(up.seen).toHaveLength(1);
    });

    it('checks again after beforeAttempt, which may have waited', async () => {
      const up = await scripted([{}]);
      const err = await failureOf(
        client(up.url).call(
          call({
            deadline: Date.now() + 50,
            beforeAttempt: () => new Promise((resolve) => setTimeout(resolve, 100)),
          }),
        ),
      );
      expect(err.code).toBe('expired');
      expect(up.seen).toHaveLength(0);
    });
  });

  it('stops and rethrows as is when beforeAttempt throws', async () => {
    const up = await scripted([failure(500, 'boom'), {}]);
    const lost = new Error('lock lease lost');
    const err = await client(up.url)
      .call(
        call({
          beforeAttempt: async (n) => {
            if (n === 2) throw lost;
          },
        }),
      )
      .catch((e: unknown) => e);
    expect(err).toBe(lost);
    expect(up.seen).toHaveLength(1);
  });

  describe('abort signal', () => {
    it('aborts an attempt in flight with unavailable', async () => {
      const up = await scripted([{ hang: true }]);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const started = Date.now();
      const err = await failureOf(client(up.url).call(call({ signal: controller.signal })));
      expect(err.code).toBe('unavailable');
      expect(err.message).toBe('bridge is shutting down');
      expect(Date.now() - started).toBeLessThan(1000);
      expect(up.seen).toHaveLength(1);
    });

    it('aborts a backoff sleep', async () => {
      const up = await scripted([failure(429, 'slow down', { headers: { 'retry-after': '10' } })]);
      const controller = new AbortController();
      const c = client(up.url);
      const started = Date.now();
      const pending = c.call(call({ signal: controller.signal, onRateLimited: () => setTimeout(() => controller.abort(), 100) }));
      const err = await failureOf(pending);
      expect(err.code).toBe('unavailable');
      expect(Date.now() - started).toBeLessThan(2000);
      expect(up.seen).toHaveLength(1);
    });

    it('sends nothing when already aborted', async () => {
      const up = await scripted([{}]);
      const err = await failureOf(client(up.url).call(call({ signal: AbortSignal.abort() })));
      expect(err.code).toBe('unavailable');
      expect(up.seen).toHaveLength(0);
    });
  });

  it('refuses calls after close()', async () => {
    const up = await scripted([{}]);
    const c = client(up.url);
    await c.close();
    const err = await failureOf(c.call(call()));
    expect(err.code).toBe('unavailable');
  });

  it('never logs an API key', async () => {
    const up = await scripted([failure(401, 'invalid api key'), failure(500, 'boom'), {}]);
    const sink = logSink();
    await client(up.url, { apiKeys: ['sk-secret-aaa', 'sk-secret-bbb'], logger: createLogger('debug', sink.stream) }).call(call());
    const logged = sink.text();
    expect(logged).toContain('upstream attempt');
    expect(logged).toContain('"reqId":"r-1"');
    expect(logged).not.toContain('sk-secret');
  });
});

describe('exchange', () => {
  const post = { path: '/v1/chat/completions', method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: '{}' };

  /** A pool of ONE socket, held by an exchange the upstream never answers. */
  async function heldPool(): Promise<{ up: Scripted; pool: Pool; holder: { settled: Exchange | undefined }; release: AbortController }> {
    const up = await scripted([{ hang: true }, {}]);
    const pool = new Pool(new URL(up.url).origin, { connections: 1 });
    const release = new AbortController();
    const holder: { settled: Exchange | undefined } = { settled: undefined };
    void exchange(pool, post, 60_000, release.signal).then((e) => (holder.settled = e));
    await expect.poll(() => up.seen.length).toBe(1);
    return { up, pool, holder, release };
  }

  it('reads a whole answer with its status and headers', async () => {
    const up = await scripted([{ status: 201, headers: { 'retry-after': '3' }, body: { ok: true } }]);
    const pool = new Pool(new URL(up.url).origin);
    const result = await exchange(pool, post, 2000, undefined);
    expect(result).toMatchObject({ kind: 'response', status: 201, text: '{"ok":true}' });
    expect(result.kind === 'response' && result.headers['retry-after']).toBe('3');
    await pool.close();
  });

  it('times out while still waiting for a pooled socket, without waiting for the socket, and never sends', async () => {
    const { up, pool, holder, release } = await heldPool();
    const queued = await exchange(pool, post, 200, undefined);
    expect(queued).toEqual({ kind: 'timeout' });
    expect(holder.settled).toBeUndefined(); // the socket was never freed meanwhile
    release.abort();
    await expect.poll(() => holder.settled).toEqual({ kind: 'aborted' });
    // Once the socket frees, the given-up request is aborted before a byte of it is written.
    expect((await exchange(pool, post, 2000, undefined)).kind).toBe('response');
    expect(up.seen).toHaveLength(2);
    await pool.close();
  });

  it('ends with aborted when the outer signal fires while waiting for a socket', async () => {
    const { up, pool, holder, release } = await heldPool();
    const outer = new AbortController();
    const queued = exchange(pool, post, 60_000, outer.signal);
    outer.abort();
    expect(await queued).toEqual({ kind: 'aborted' });
    expect(holder.settled).toBeUndefined();
    release.abort();
    expect((await exchange(pool, post, 2000, undefined)).kind).toBe('response');
    expect(up.seen).toHaveLength(2);
    await pool.close();
  });

  it('reports a refused connection as an error', async () => {
    const up = await scripted([{}]);
    const origin = new URL(up.url).origin;
    await up.close();
    const pool = new Pool(origin);
    const result = await exchange(pool, post, 2000, undefined);
    expect(result.kind).toBe('error');
    expect(result.kind === 'error' && (result.error as Error & { code?: string }).code).toBe('ECONNREFUSED');
    await pool.close();
  });
});
