// Finding: devices could fill the dead-letter list. Every failed request was kept whole (up to
// 256 KiB), with no bound and no age, and every reader loaded the list whole. Now the list holds
// at most DLQ_MAX entries and DLQ_MAX_BYTES (the oldest dropped and counted in
// edge_ai_bridge_dead_letters_dropped_total), pages are read with a cursor and one entry is
// looked up alone. The attacker's requests make the model server fail (a prompt it crashes on,
// answered 500: what a replay could fix, so dead-lettered); an innocent device on the other
// instance is answered meanwhile, and Redis holds no more than the bounds.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstreamSim, type UpstreamSim } from '../../../upstream-sim/sim.js';
import { http } from '../../helpers/admin-http.js';
import { ask, startHarness, type Harness } from '../../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';
import { tempDir } from '../../helpers/security.js';
import { readUntil } from '../../helpers/wait.js';

const DLQ_MAX = 8;
const DLQ_MAX_BYTES = 1_000_000;
const LARGE = 20;
const SMALL = 20;
/** About 150 KB of prompt per large request (MAX_PAYLOAD_BYTES is 256 KiB). */
const LARGE_PROMPT = 150_000;
const INNOCENT_BOUND_MS = 5000;
const TOKEN = 'iso-dlq-admin-token-0123456789';
const MARK = 'CRASHES-THE-MODEL';

/** The model server: fails every call whose prompt carries MARK, answers the rest through the simulator. */
async function crashingUpstream(sim: UpstreamSim): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (body.includes(MARK)) {
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'model server crashed', type: 'server_error' } }));
        return;
      }
      const headers = { 'content-type': 'application/json', authorization: req.headers.authorization ?? '' };
      fetch(`${sim.url.replace(/\/v1$/, '')}${req.url}`, { method: req.method, headers, body: req.method === 'GET' ? undefined : body }).then(
        async (answer) =>
          res
            .writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' })
            .end(Buffer.from(await answer.arrayBuffer())),
        () => res.writeHead(502).end(),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, server };
}

const metric = async (h: Harness, name: string): Promise<number> => {
  const text = await (await fetch(`http://127.0.0.1:${h.bridge.httpPort}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
};

describe('isolation: a device filling the dead-letter list', () => {
  const redis = connectRedis();
  const prefix = uniquePrefix('iso-dlq');
  const dir = tempDir('eab-iso-dlq-');
  let sim: UpstreamSim;
  let upstream: { url: string; server: Server };
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    sim = await startUpstreamSim({ port: 0, latencyMs: 5 });
    upstream = await crashingUpstream(sim);
    // The breaker must not hide the dead letters behind `no provider available`: this test is about the list.
    const configFile = join(dir.path, 'config.json');
    writeFileSync(configFile, JSON.stringify({ breaker: { consecutiveFailures: 1000, minCalls: 100_000 } }));
    const env = {
      REDIS_URL,
      REDIS_PREFIX: prefix,
      UPSTREAM_URL: upstream.url,
      CONFIG_FILE: configFile,
      ADMIN_TOKEN: TOKEN,
      MAX_ATTEMPTS: '1',
      DEVICE_RATE_LIMIT_RPM: '10000',
      DLQ_MAX: String(DLQ_MAX),
      DLQ_MAX_BYTES: String(DLQ_MAX_BYTES),
    };
    a = await startHarness(env, {}, undefined, { upstream: sim });
    b = await startHarness(env, {}, undefined, { upstream: sim });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    upstream?.server.close();
    await sim?.close();
    await deletePrefix(redis, prefix);
    redis.disconnect();
    dir.remove();
  });

  /** Bytes Redis holds for the deployment's dead letters, every key of them. */
  async function deadLetterBytes(): Promise<number> {
    const keys = await redis.keys(`{${prefix}}:dlq*`);
    let total = 0;
    for (const key of keys) total += Number(await redis.memory('USAGE', key, 'SAMPLES', 0));
    return total;
  }

  it(
    `keeps at most ${DLQ_MAX} entries and ${DLQ_MAX_BYTES} bytes, counts what it drops, pages, and answers an innocent device`,
    { timeout: 90_000 },
    async () => {
      const attacker = await a.device('attacker');
      const innocent = await b.device('innocent');
      const large = Array.from({ length: LARGE }, (_, i) => `big-${i}`);
      const small = Array.from({ length: SMALL }, (_, i) => `small-${i}`);
      const pad = 'x'.repeat(LARGE_PROMPT);
      await Promise.all(large.map((id) => attacker.publish('normal', ask(id, `${MARK} ${id} ${pad}`))));

      const started = Date.now();
      await innocent.publish('normal', ask('fine', 'hello'));
      expect((await innocent.reply('fine', { timeoutMs: INNOCENT_BOUND_MS }))[0]).toMatchObject({ ok: true });
      expect(Date.now() - started).toBeLessThan(INNOCENT_BOUND_MS);

      for (const id of large) expect((await attacker.reply(id, { timeoutMs: 30_000 }))[0]).toMatchObject({ ok: false, error: { code: 'upstream_error' } });
      // The bytes bound: about six of the large ones fit.
      expect(await deadLetterBytes()).toBeLessThan(DLQ_MAX_BYTES * 1.1);
      await Promise.all(small.map((id) => attacker.publish('normal', ask(id, `${MARK} ${id}`))));
      for (const id of small) expect((await attacker.reply(id, { timeoutMs: 30_000 }))[0]?.ok).toBe(false);

      // The entries bound: the newest DLQ_MAX, every one the attacker's; the rest dropped and counted.
      // A reply is published before its job is completed (and dead-lettered): the last completions
      // may still be on their way when the device has its replies.
      const dropped = async (): Promise<number> =>
        (await metric(a, 'edge_ai_bridge_dead_letters_dropped_total')) + (await metric(b, 'edge_ai_bridge_dead_letters_dropped_total'));
      expect(await readUntil(dropped, (n) => n >= LARGE + SMALL - DLQ_MAX)).toBe(LARGE + SMALL - DLQ_MAX);
      const listed = await http(a.bridge, '/v1/dlq', { token: TOKEN });
      const { count } = listed.json as { count: number };
      expect(count).toBe(DLQ_MAX);
      expect(await deadLetterBytes()).toBeLessThan(DLQ_MAX_BYTES * 1.1);

      // Read a page at a time; every kept entry once, oldest first.
      const seen: string[] = [];
      let after: string | null = null;
      do {
        const page = (await http(b.bridge, `/v1/dlq?limit=3${after ? `&after=${encodeURIComponent(after)}` : ''}`, { token: TOKEN })).json as {
          entries: Array<{ key: string; at: string }>;
          next: string | null;
        };
        expect(page.entries.length).toBeLessThanOrEqual(3);
        seen.push(...page.entries.map((e) => e.key));
        after = page.next;
      } while (after !== null);
      expect(seen).toHaveLength(DLQ_MAX);
      expect(new Set(seen).size).toBe(DLQ_MAX);
      expect(seen.every((key) => key.startsWith('attacker/small-'))).toBe(true);

      // One entry alone, with its request.
      const one = await http(b.bridge, `/v1/dlq/${seen[0]}`, { token: TOKEN });
      expect(one.json).toMatchObject({ entry: { key: seen[0], error: { code: 'upstream_error' }, request: { messages: [{ role: 'user' }] } } });
      for (const h of [a, b]) expect((await fetch(`http://127.0.0.1:${h.bridge.httpPort}/readyz`)).status).toBe(200);
    },
  );
});
