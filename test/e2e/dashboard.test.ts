// The operator dashboard's data, read as the page reads it: what devices were answered shows
// in the events as it happens, a device is found by search (on a Redis fleet, on whichever
// instance it is connected to), dead letters list without their prompt, and reads are open
// only on a loopback address without ADMIN_TOKEN.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { getJson, readEvents, ticks } from '../helpers/dashboard.js';
import { MAX_EVENT_STREAMS } from '../../bridge/ops/dashboard/http.js';
import { ask, startHarness, type Harness } from '../helpers/harness.js';

const TICK = { bridge: { dashboardTickMs: 200 } };
const base = (h: Harness): string => `http://127.0.0.1:${h.bridge.httpPort}`;

/** fetch() will not send another Host header: as a page on a rebound name would. */
function statusWithHost(port: number, path: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on('error', reject)
      .end();
  });
}

describe('dashboard (one instance)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({}, { latencyMs: 20 }, undefined, TICK);
  });
  afterAll(async () => {
    await h.close();
  });

  it('shows replies by priority and outcome, latency, the instance and the provider as they happen', async () => {
    const device = await h.device('cam-live');
    h.upstream.script({ status: 500 }); // one failed attempt, retried: the provider's error rate
    const ids = Array.from({ length: 8 }, (_, i) => `live-${i}`);
    for (const id of ids) await device.publish(id === 'live-0' ? 'high' : 'normal', ask(id));
    for (const id of ids) await device.reply(id);
    await device.publish('normal', ask('bad', 'q', { max_tokens: 'many' }));
    await device.reply('bad');

    const events = await readEvents(base(h), (seen) => ticks(seen).length >= 3);
    expect(events[0]?.name).toBe('history');
    const points = [...(events[0]?.name === 'history' ? events[0].data.points : []), ...ticks(events).map((t) => t.point)];
    const answered = (f: (p: (typeof points)[number]) => number): number => Math.round(points.reduce((sum, p) => sum + f(p) * p.seconds, 0));
    expect(answered((p) => p.rps.normal)).toBe(8);
    expect(answered((p) => p.rps.high)).toBe(1);
    expect(answered((p) => p.outcomes.ok ?? 0)).toBe(8);
    expect(answered((p) => p.outcomes.invalid_request ?? 0)).toBe(1);
    expect(points.some((p) => (p.e2e.normal?.p99 ?? 0) >= 20)).toBe(true);
    expect(points.some((p) => p.wait.normal !== null)).toBe(true);

    const last = ticks(events).at(-1)!;
    expect(last.instances).toEqual([
      expect.objectContaining({ instance: h.bridge.instanceId, connectedClients: 1, ready: true, notReady: [], storeReachable: true, store: 'memory' }),
    ]);
    const providerTicks = ticks(events).flatMap((t) => t.providers);
    expect(providerTicks[0]).toMatchObject({ provider: 'primary', circuit: 'closed', available: true, keys: [{ id: 'none', state: 'healthy' }] });
    expect(last.deadLetters).toBe(0);
  });

  it('finds a device by part of its id, with its connection and recent requests, no prompt', async () => {
    const device = await h.device('line4-cam-17');
    await device.publish('low', ask('find-me', 'secret recipe'));
    await device.reply('find-me');
    const { status, body } = await getJson(base(h), '/dashboard/api/devices?q=CAM-17');
    expect(status).toBe(200);
    expect(body.devices).toEqual([
      {
        deviceId: 'line4-cam-17',
        connections: [{ clientId: 'line4-cam-17', instance: h.bridge.instanceId }],
        recent: [expect.objectContaining({ id: 'find-me', priority: 'low', outcome: 'ok', instance: h.bridge.instanceId })],
      },
    ]);
    expect(JSON.stringify(body)).not.toContain('secret recipe');
    expect((await getJson(base(h), '/dashboard/api/devices?q=nobody')).body).toEqual({ devices: [] });
    expect((await getJson(base(h), '/dashboard/api/devices')).status).toBe(400);
  });

  it('lists a dead letter without its request, and shows the request when asked for it', async () => {
    const device = await h.device('cam-dead');
    h.upstream.script({ status: 500 }, { status: 500 }, { status: 500 }); // every attempt fails: a replay could answer it
    await device.publish('normal', ask('dead-1', 'the prompt'));
    expect((await device.reply('dead-1'))[0]).toMatchObject({ ok: false, error: { code: 'upstream_error' } });
    const list = await getJson(base(h), '/dashboard/api/dlq');
    expect(list.body).toMatchObject({
      count: 1,
      next: null,
      entries: [{ key: 'cam-dead/dead-1', deviceId: 'cam-dead', id: 'dead-1', error: { code: 'upstream_error' } }],
    });
    expect(JSON.stringify(list.body)).not.toContain('the prompt');
    expect((await getJson(base(h), '/dashboard/api/dlq?limit=0')).status).toBe(400);
    expect((await getJson(base(h), '/dashboard/api/dlq?after=nonsense')).status).toBe(400);
    const one = await getJson(base(h), '/dashboard/api/dlq/cam-dead/dead-1');
    expect(one.body.entry.request.messages).toEqual([{ role: 'user', content: 'the prompt' }]);
    expect((await getJson(base(h), '/dashboard/api/dlq/cam-dead/nope')).status).toBe(404);
  });

  it('serves the page with a strict Content-Security-Policy, and nothing from elsewhere', async () => {
    const res = await fetch(`${base(h)}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await res.text();
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/<script>|<style|style=/);
    for (const file of ['/dashboard/app.js', '/dashboard/uPlot.iife.min.js', '/dashboard/uPlot.min.css'])
      expect((await fetch(`${base(h)}${file}`)).status).toBe(200);
    expect((await fetch(`${base(h)}/dashboard/../package.json`)).status).toBe(404);
  });
});

/** An event stream held open once its first event arrived; `close` ends it. */
async function holdStream(url: string): Promise<{ status: number; retryAfter: string | null; close(): void }> {
  const abort = new AbortController();
  const res = await fetch(url, { signal: abort.signal });
  if (res.status === 200)
    await res.body!.getReader().read(); // the history: the server holds the stream
  else await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), close: () => abort.abort() };
}

describe('dashboard event streams', () => {
  it(`holds at most ${MAX_EVENT_STREAMS} open at once, refuses more with 503 and Retry-After, and takes one again once one closes`, async () => {
    const h = await startHarness({}, {}, undefined, TICK);
    const url = `${base(h)}/dashboard/api/events`;
    const open: Array<{ close(): void }> = [];
    try {
      for (let i = 0; i < MAX_EVENT_STREAMS; i += 1) {
        const stream = await holdStream(url);
        expect(stream.status).toBe(200);
        open.push(stream);
      }
      const refused = await holdStream(url);
      expect(refused.status).toBe(503);
      expect(Number(refused.retryAfter)).toBeGreaterThan(0);
      expect((await getJson(base(h), '/dashboard/api/usage')).status).toBe(200); // the rest of the page still answers
      expect((await fetch(`${base(h)}/readyz`)).status).toBe(200);

      open.shift()?.close();
      let again = await holdStream(url);
      for (let tries = 0; again.status !== 200 && tries < 100; tries += 1) {
        await new Promise((resolve) => setTimeout(resolve, 20)); // the server hears of the close a moment later
        again = await holdStream(url);
      }
      expect(again.status).toBe(200);
      open.push(again);
    } finally {
      for (const stream of open) stream.close();
      await h.close();
    }
  });
});

describe('dashboard access', () => {
  it('reads open on loopback without ADMIN_TOKEN, but not for a page that names another host', async () => {
    const h = await startHarness({}, {}, undefined, TICK);
    try {
      expect((await getJson(base(h), '/dashboard/api/access')).body).toEqual({ open: true, actions: false });
      expect((await getJson(base(h), '/dashboard/api/usage')).status).toBe(200);
      expect((await getJson(base(h), '/v1/dlq')).status).toBe(404); // actions need the token
      expect(await statusWithHost(h.bridge.httpPort, '/dashboard/api/usage', `evil.example:${h.bridge.httpPort}`)).toBe(403);
      expect(await statusWithHost(h.bridge.httpPort, '/dashboard/api/usage', `localhost:${h.bridge.httpPort}`)).toBe(200);
    } finally {
      await h.close();
    }
  });

  it('needs the token for every read once ADMIN_TOKEN is set', async () => {
    const token = 'dash-token-0123456789abcdef';
    const h = await startHarness({ ADMIN_TOKEN: token }, {}, undefined, TICK);
    try {
      expect((await getJson(base(h), '/dashboard/api/access')).body).toEqual({ open: false, actions: true });
      for (const path of ['/dashboard/api/usage', '/dashboard/api/dlq', '/dashboard/api/devices?q=x']) {
        expect((await getJson(base(h), path)).status).toBe(401);
        expect((await getJson(base(h), path, 'wrong')).status).toBe(401);
        expect((await getJson(base(h), path, token)).status).toBe(200);
      }
      await expect(readEvents(base(h), () => true)).rejects.toThrow('401');
      expect(ticks(await readEvents(base(h), (e) => ticks(e).length > 0, { token }))).toHaveLength(1);
      expect((await fetch(`${base(h)}/`)).status).toBe(200); // the page itself holds no data
    } finally {
      await h.close();
    }
  });

  it('refuses reads without a token when the admin port listens beyond loopback', async () => {
    const h = await startHarness({ HTTP_HOST: '0.0.0.0' }, {}, undefined, TICK);
    try {
      expect((await getJson(base(h), '/dashboard/api/access')).body).toEqual({ open: false, actions: false });
      expect((await getJson(base(h), '/dashboard/api/usage')).status).toBe(403);
    } finally {
      await h.close();
    }
  });
});

describe('dashboard (a fleet on Redis)', () => {
  let fleet: Fleet;
  beforeAll(async () => {
    fleet = await startFleet(2, {}, {}, TICK);
  });
  afterAll(async () => {
    await fleet.close();
  });

  it("shows every instance, each one's replies, and finds a device on the other instance", async () => {
    const [a, b] = fleet.instances as [Harness, Harness];
    const onB = await b.device('fleet-cam-b');
    for (const id of ['b1', 'b2', 'b3']) await onB.publish('critical', ask(id));
    for (const id of ['b1', 'b2', 'b3']) await onB.reply(id);

    const events = await readEvents(base(a), (seen) => ticks(seen).some((t) => t.instances.length === 2) && ticks(seen).length >= 4);
    const last = ticks(events).at(-1)!;
    expect(last.instances.map((i) => i.instance).sort()).toEqual([a.bridge.instanceId, b.bridge.instanceId].sort());
    expect(last.instances.every((i) => i.store === 'redis' && i.ready)).toBe(true);
    const points = [...ticks(events).map((t) => t.point)];
    expect(points.some((p) => p.rps.critical > 0)).toBe(true);

    const { body } = await getJson(base(a), '/dashboard/api/devices?q=fleet-cam');
    expect(body.devices).toEqual([
      {
        deviceId: 'fleet-cam-b',
        connections: [{ clientId: 'fleet-cam-b', instance: b.bridge.instanceId }],
        recent: expect.arrayContaining([expect.objectContaining({ id: 'b3', outcome: 'ok', priority: 'critical' })]),
      },
    ]);
  });
});
