import { afterEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { simEmbedding, startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../upstream-sim/sim.js';

const sims: UpstreamSim[] = [];

async function start(opts: Partial<UpstreamSimOptions> = {}): Promise<UpstreamSim> {
  const sim = await startUpstreamSim({ port: 0, latencyMs: 0, ...opts });
  sims.push(sim);
  return sim;
}

afterEach(async () => {
  await Promise.all(sims.splice(0).map((s) => s.close()));
});

interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}

async function post(sim: UpstreamSim, path: string, body: unknown, key = 'sk-test-secret-abcd'): Promise<Res> {
  const res = await request(`${sim.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, body: await res.body.json() };
}

const chat = (text: string, model?: string): unknown => ({
  ...(model === undefined ? {} : { model }),
  messages: [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'earlier question' },
    { role: 'assistant', content: 'earlier answer' },
    { role: 'user', content: text },
  ],
  max_tokens: 32,
});

describe('upstream-sim', () => {
  it('listens on a free port and reports a /v1 base URL', async () => {
    const sim = await start();
    expect(sim.port).toBeGreaterThan(0);
    expect(sim.url).toBe(`http://127.0.0.1:${sim.port}/v1`);
  });

  it('answers chat completions in the OpenAI format, deterministically from the last user message', async () => {
    const sim = await start();
    const long = 'x'.repeat(200);
    const res = await post(sim, '/chat/completions', chat(`Is there a scratch? ${long}`, 'gpt-4o-mini'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    const expected = `sim answer to: ${`Is there a scratch? ${long}`.slice(0, 80)}`;
    expect(res.body).toMatchObject({
      object: 'chat.completion',
      model: 'gpt-4o-mini',
      choices: [{ index: 0, message: { role: 'assistant', content: expected }, finish_reason: 'stop' }],
    });
    const body = res.body as { id: string; created: number; usage: Record<string, number> };
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(Math.abs(body.created - Date.now() / 1000)).toBeLessThan(5);
    expect(body.usage.completion_tokens).toBe(Math.ceil(expected.length / 4));
    expect(body.usage.prompt_tokens).toBeGreaterThan(50);
    expect(body.usage.total_tokens).toBe((body.usage.prompt_tokens ?? 0) + (body.usage.completion_tokens ?? 0));

    const again = await post(sim, '/chat/completions', chat(`Is there a scratch? ${long}`));
    expect(again.body).toMatchObject({ model: 'sim-model', choices: [{ message: { content: expected } }] });
  });

  it('reads text out of content parts and ignores images', async () => {
    const sim = await start();
    const res = await post(sim, '/chat/completions', {
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is on' },
            { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
            { type: 'text', text: 'this belt?' },
          ],
        },
      ],
    });
    expect(res.body).toMatchObject({ choices: [{ message: { content: 'sim answer to: what is on this belt?' } }] });
  });

  it('records requests with lower-cased headers and parsed bodies', async () => {
    const sim = await start();
    const before = Date.now();
    await post(sim, '/chat/completions', chat('hello'));
    expect(sim.requests).toHaveLength(1);
    const [rec] = sim.requests;
    expect(rec?.path).toBe('/v1/chat/completions');
    expect(rec?.headers.authorization).toBe('Bearer sk-test-secret-abcd');
    expect(rec?.body).toEqual(chat('hello'));
    expect(rec?.at).toBeGreaterThanOrEqual(before);
  });

  it('reports when a call has arrived, before it is answered, and fails after its deadline', async () => {
    const sim = await start({ latencyMs: 10_000 });
    const pending = post(sim, '/chat/completions', chat('slow')).catch(() => undefined);
    await sim.requested(1);
    expect(sim.requests[0]?.answeredAt).toBeUndefined();
    await expect(sim.requested(2, 50)).rejects.toThrow('upstream-sim: 1/2 calls after 50 ms');
    await sim.close();
    await pending;
  });

  it('answers invalid JSON and bad bodies with 400 in the OpenAI error format', async () => {
    const sim = await start();
    const bad = await post(sim, '/chat/completions', '{"messages": [');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: { type: 'invalid_request_error', message: expect.any(String) } });
    expect((await post(sim, '/chat/completions', { messages: [] })).status).toBe(400);
    expect((await post(sim, '/embeddings', { input: 3 })).status).toBe(400);
  });

  it('serves only /v1 paths; others are 404, wrong methods 405', async () => {
    const sim = await start();
    expect((await post(sim, '/../chat/completions', chat('x'))).status).toBe(404);
    const noPrefix = await request(`http://127.0.0.1:${sim.port}/chat/completions`, { method: 'POST', body: '{}' });
    expect(noPrefix.statusCode).toBe(404);
    await noPrefix.body.dump();
    const get = await request(`${sim.url}/chat/completions`);
    expect(get.statusCode).toBe(405);
    await get.body.dump();
  });

  it('lists models', async () => {
    const sim = await start();
    const res = await request(`${sim.url}/models`);
    expect(res.statusCode).toBe(200);
    const body = (await res.body.json()) as { object: string; data: { id: string; object: string }[] };
    expect(body.object).toBe('list');
    expect(body.data.map((m) => m.id)).toContain('sim-model');
    expect(body.data.every((m) => m.object === 'model')).toBe(true);
  });

  it('answers embeddings with deterministic small unit vectors', async () => {
    const sim = await start();
    const res = await post(sim, '/embeddings', { model: 'text-embedding-3-small', input: ['alpha', 'beta', 'alpha'] });
    expect(res.status).toBe(200);
    const body = res.body as {
      object: string;
      model: string;
      data: { object: string; index: number; embedding: number[] }[];
      usage: { prompt_tokens: number; total_tokens: number };
    };
    expect(body.object).toBe('list');
    expect(body.model).toBe('text-embedding-3-small');
    expect(body.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const d of body.data) {
      expect(d.object).toBe('embedding');
      expect(d.embedding).toHaveLength(8);
      expect(Math.hypot(...d.embedding)).toBeCloseTo(1, 4);
    }
    expect(body.data[0]?.embedding).toEqual(body.data[2]?.embedding);
    expect(body.data[0]?.embedding).not.toEqual(body.data[1]?.embedding);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens);

    const single = await post(sim, '/embeddings', { input: 'alpha' });
    expect((single.body as typeof body).data[0]?.embedding).toEqual(body.data[0]?.embedding);
  });

  it('honours `dimensions`, keeping the default vector as its head', async () => {
    const sim = await start();
    const res = await post(sim, '/embeddings', { input: 'alpha', dimensions: 40 });
    expect(res.status).toBe(200);
    const [d] = (res.body as { data: { embedding: number[] }[] }).data;
    expect(d?.embedding).toHaveLength(40);
    expect(d?.embedding).toEqual(simEmbedding('alpha', 40));
    expect(Math.hypot(...(d?.embedding ?? []))).toBeCloseTo(1, 4);
    expect(simEmbedding('alpha')).toHaveLength(8);
    expect((await post(sim, '/embeddings', { input: 'alpha', dimensions: 0 })).status).toBe(400);
  });

  it('plays scripted steps in order, then resumes normal answers', async () => {
    const sim = await start();
    sim.script({ status: 500 }, { status: 503, body: { error: { message: 'custom' } }, retryAfterS: 7 }, { delayMs: 150 });
    const first = await post(sim, '/chat/completions', chat('a'));
    expect(first.status).toBe(500);
    expect(first.body).toMatchObject({ error: { type: 'server_error' } });
    const second = await post(sim, '/embeddings', { input: 'b' });
    expect(second.status).toBe(503);
    expect(second.headers['retry-after']).toBe('7');
    expect(second.body).toEqual({ error: { message: 'custom' } });
    const t0 = Date.now();
    const third = await post(sim, '/chat/completions', chat('c'));
    expect(third.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    expect((await post(sim, '/chat/completions', chat('d'))).status).toBe(200);
  });

  it('answers 429 with Retry-After in seconds over rateLimitRpm', async () => {
    const sim = await start({ rateLimitRpm: 3 });
    for (let i = 0; i < 3; i++) expect((await post(sim, '/chat/completions', chat(`q${i}`))).status).toBe(200);
    const limited = await post(sim, '/chat/completions', chat('q3'));
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error: { code: 'rate_limit_exceeded' } });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(59);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Lifting the limit lets calls through at once.
    sim.setOptions({ rateLimitRpm: undefined });
    expect((await post(sim, '/chat/completions', chat('q4'))).status).toBe(200);
  });

  it('injects random errors at errorRate and applies latency', async () => {
    const sim = await start({ errorRate: 1, latencyMs: 100 });
    const t0 = Date.now();
    expect((await post(sim, '/chat/completions', chat('x'))).status).toBe(500);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(90);
    sim.setOptions({ errorRate: 0, latencyMs: 0 });
    expect((await post(sim, '/chat/completions', chat('x'))).status).toBe(200);
    expect(() => sim.setOptions({ errorRate: 2 })).toThrow(/errorRate/);
  });

  it('refuses GET /v1/models to a revoked key, and a model to the key that may not use it (403)', async () => {
    const sim = await start({
      revokedKeys: ['sk-gone-0000'],
      refusedModels: [
        { key: 'sk-one-1111', model: 'gpt-x' },
        { key: '*', model: 'gpt-y' },
      ],
    });
    const models = async (key: string): Promise<number> => (await request(`${sim.url}/models`, { headers: { authorization: `Bearer ${key}` } })).statusCode;
    expect(await models('sk-gone-0000')).toBe(401);
    expect(await models('sk-one-1111')).toBe(200);
    const refused = await post(sim, '/chat/completions', chat('q', 'gpt-x'), 'sk-one-1111');
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: 'model_not_allowed' } });
    expect((await post(sim, '/chat/completions', chat('q', 'gpt-x'), 'sk-two-2222')).status).toBe(200);
    expect((await post(sim, '/chat/completions', chat('q', 'sim-model'), 'sk-one-1111')).status).toBe(200);
    expect((await post(sim, '/chat/completions', chat('q', 'gpt-y'), 'sk-two-2222')).status).toBe(403);
    await expect(startUpstreamSim({ port: 0, refusedModels: [{ key: '', model: 'm' }] })).rejects.toThrow(/refusedModels/);
  });

  it('rejects bad options', async () => {
    await expect(startUpstreamSim({ port: 0, hangRate: -0.1 })).rejects.toThrow(/hangRate/);
    await expect(startUpstreamSim({ port: 70000 })).rejects.toThrow(/port/);
  });

  it('hangs scripted and random calls until close(), which resolves promptly', async () => {
    const sim = await startUpstreamSim({ port: 0, latencyMs: 0 });
    sim.script({ hang: true });
    const hung = post(sim, '/chat/completions', chat('never')).then(
      () => 'answered',
      () => 'failed',
    );
    sim.setOptions({ hangRate: 1 });
    const hung2 = post(sim, '/embeddings', { input: 'never' }).then(
      () => 'answered',
      () => 'failed',
    );
    await expect.poll(() => sim.stats().hanging).toBe(2);
    const raced = await Promise.race([hung, new Promise((r) => setTimeout(() => r('pending'), 200))]);
    expect(raced).toBe('pending');

    const t0 = Date.now();
    await sim.close();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(await hung).toBe('failed');
    expect(await hung2).toBe('failed');
    expect(sim.stats().byStatus.hang).toBe(2);
  });

  it('counts calls at /stats by status, path, model and key suffix, never the full key', async () => {
    const sim = await start();
    sim.script({ status: 429, retryAfterS: 1 });
    await post(sim, '/chat/completions', chat('a'), 'sk-first-key-1111');
    await post(sim, '/chat/completions', chat('b', 'gpt-4o'), 'sk-first-key-1111');
    await post(sim, '/embeddings', { input: 'c' }, 'sk-other-key-2222');
    await (await request(`${sim.url}/models`)).body.dump();

    const res = await request(`http://127.0.0.1:${sim.port}/stats`);
    const text = await res.body.text();
    expect(text).not.toContain('sk-first');
    const stats = JSON.parse(text) as unknown;
    expect(stats).toEqual({
      total: 4,
      byStatus: { '200': 3, '429': 1 },
      byPath: { '/v1/chat/completions': 2, '/v1/embeddings': 1, '/v1/models': 1 },
      byModel: { 'sim-model': 1, 'gpt-4o': 1, 'sim-embedding': 1 },
      byKey: { '…1111': 2, '…2222': 1, none: 1 },
      hanging: 0,
    });
    expect(sim.stats()).toEqual(stats);

    sim.reset();
    expect(sim.requests).toHaveLength(0);
    expect(sim.stats().total).toBe(0);
  });
});
