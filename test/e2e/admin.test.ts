// Admin HTTP: /healthz, /readyz and the operator API under /v1/ (bearer ADMIN_TOKEN).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ask, startHarness, type Harness } from '../helpers/harness.js';
import { http } from '../helpers/admin-http.js';

const TOKEN = 'admin-secret-token';
const dir = mkdtempSync(join(tmpdir(), 'admin-e2e-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('admin HTTP', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('answers 404 on every /v1/ path while ADMIN_TOKEN is unset, even with a token', async () => {
    h = await startHarness();
    expect((await http(h.bridge, '/healthz')).status).toBe(200);
    for (const path of ['/v1/dlq', '/v1/usage', '/v1/devices', '/v1/dlq/replay', '/v1']) {
      expect((await http(h.bridge, path)).status).toBe(404);
      expect((await http(h.bridge, path, { token: TOKEN })).status).toBe(404);
    }
    expect((await http(h.bridge, '/v1/dlq/replay', { method: 'POST' })).status).toBe(404);
  });

  it('answers 401 without the token and with a wrong one', async () => {
    h = await startHarness({ ADMIN_TOKEN: TOKEN });
    for (const path of ['/v1/dlq', '/v1/usage', '/v1/devices', '/v1/nothing-here']) {
      const none = await http(h.bridge, path);
      expect(none.status).toBe(401);
      expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect((await http(h.bridge, path, { token: 'wrong' })).status).toBe(401);
      expect((await http(h.bridge, path, { token: TOKEN.replace(/.$/, 'X') })).status).toBe(401);
      expect((await http(h.bridge, path, { token: `${TOKEN}x` })).status).toBe(401);
    }
    expect((await http(h.bridge, '/v1/dlq', { token: TOKEN })).status).toBe(200);
    expect((await http(h.bridge, '/v1/nothing-here', { token: TOKEN })).status).toBe(404);
    expect((await http(h.bridge, '/v1/dlq', { method: 'PUT', token: TOKEN })).status).toBe(405);
    expect((await http(h.bridge, '/v1/usage?hours=0', { token: TOKEN })).status).toBe(400);
  });

  it('replays a dead letter through the API to an ok reply, shows usage, purges', async () => {
    h = await startHarness({ ADMIN_TOKEN: TOKEN, MAX_ATTEMPTS: '1' }, { errorRate: 1 });
    const device = await h.device('cam-5');
    await device.publish('high', ask('doomed'));
    expect((await device.reply('doomed'))[0]).toMatchObject({ ok: false, error: { code: 'upstream_error' } });

    const listed = await http(h.bridge, '/v1/dlq', { token: TOKEN });
    expect(listed.status).toBe(200);
    expect(listed.json).toMatchObject({
      count: 1,
      next: null,
      entries: [{ key: 'cam-5/doomed', deviceId: 'cam-5', id: 'doomed', priority: 'high', error: { code: 'upstream_error' } }],
    });
    // One entry, looked up by its key, with its request.
    const one = await http(h.bridge, '/v1/dlq/cam-5/doomed', { token: TOKEN });
    expect(one.json).toMatchObject({ entry: { key: 'cam-5/doomed', request: { messages: [{ role: 'user', content: 'question doomed' }] } } });
    expect((await http(h.bridge, '/v1/dlq/cam-5/nope', { token: TOKEN })).status).toBe(404);
    expect((await http(h.bridge, '/v1/dlq?limit=0', { token: TOKEN })).status).toBe(400);
    expect((await http(h.bridge, '/v1/dlq?limit=1001', { token: TOKEN })).status).toBe(400);
    expect((await http(h.bridge, '/v1/dlq?after=not-a-cursor', { token: TOKEN })).status).toBe(400);

    expect((await http(h.bridge, '/v1/dlq/cam-5/nope/replay', { method: 'POST', token: TOKEN })).status).toBe(404);
    h.upstream.setOptions({ errorRate: 0 });
    const replayed = await http(h.bridge, '/v1/dlq/cam-5/doomed/replay', { method: 'POST', token: TOKEN });
    expect(replayed).toMatchObject({ status: 200, json: { replayed: 1 } });
    const [, second] = await device.reply('doomed', { count: 2 });
    expect(second).toMatchObject({ ok: true, content: 'sim answer to: question doomed' });
    expect((await http(h.bridge, '/v1/dlq', { token: TOKEN })).json).toMatchObject({ count: 0, entries: [] });

    const usage = await http(h.bridge, '/v1/usage?hours=1', { token: TOKEN });
    expect(usage.status).toBe(200);
    const report = usage.json as { hours: number; byDevice: Record<string, { requests: number; promptTokens: number; completionTokens: number }> };
    expect(report.hours).toBe(1);
    expect(report.byDevice['cam-5']).toMatchObject({
      requests: 1,
      promptTokens: second?.ok ? second.usage?.prompt_tokens : -1,
      completionTokens: second?.ok ? second.usage?.completion_tokens : -1,
    });

    // Two more dead letters: replay-all answers both, then one more is purged.
    h.upstream.setOptions({ errorRate: 1 });
    await device.publish('low', ask('d-1'));
    await device.publish('low', ask('d-2'));
    await device.reply('d-1');
    await device.reply('d-2');
    // A page at a time, oldest first: the `next` of one page is the `after` of the next.
    const page1 = (await http(h.bridge, '/v1/dlq?limit=1', { token: TOKEN })).json as { count: number; entries: Array<{ key: string }>; next: string };
    expect(page1).toMatchObject({ count: 2, entries: [{ key: expect.stringMatching(/^cam-5\/d-[12]$/) }] });
    const page2 = (await http(h.bridge, `/v1/dlq?limit=1&after=${encodeURIComponent(page1.next)}`, { token: TOKEN })).json as typeof page1;
    expect(page2).toMatchObject({ count: 2, next: null });
    expect([page1.entries[0]?.key, page2.entries[0]?.key].sort()).toEqual(['cam-5/d-1', 'cam-5/d-2']);
    h.upstream.setOptions({ errorRate: 0 });
    expect((await http(h.bridge, '/v1/dlq/replay', { method: 'POST', token: TOKEN })).json).toEqual({ replayed: 2 });
    expect((await device.reply('d-1', { count: 2 }))[1]).toMatchObject({ ok: true });
    expect((await device.reply('d-2', { count: 2 }))[1]).toMatchObject({ ok: true });

    h.upstream.setOptions({ errorRate: 1 });
    await device.publish('low', ask('d-3'));
    await device.reply('d-3');
    expect((await http(h.bridge, '/v1/dlq', { method: 'DELETE', token: TOKEN })).json).toEqual({ purged: 1 });
    expect((await http(h.bridge, '/v1/dlq', { token: TOKEN })).json).toMatchObject({ count: 0 });
  });

  it('lists connected devices and their client ids', async () => {
    h = await startHarness({ ADMIN_TOKEN: TOKEN });
    await h.device('cam-7');
    const sub = await h.device('cam-7.sub');
    await h.device('cam-8');
    const listed = await http(h.bridge, '/v1/devices', { token: TOKEN });
    expect(listed.status).toBe(200);
    expect(listed.json).toMatchObject({ count: 2 });
    const devices = (listed.json as { devices: Array<{ deviceId: string; clientIds: string[] }> }).devices;
    expect(devices).toContainEqual({ deviceId: 'cam-7', clientIds: ['cam-7', 'cam-7.sub'] });
    expect(devices).toContainEqual({ deviceId: 'cam-8', clientIds: ['cam-8'] });

    await sub.close();
    await expect
      .poll(async () => ((await http(h!.bridge, '/v1/devices', { token: TOKEN })).json as { devices: unknown[] }).devices)
      .toContainEqual({ deviceId: 'cam-7', clientIds: ['cam-7'] });
  });

  it("/readyz: 200 with the bound ports, 503 once the only provider's circuit is open", async () => {
    const configFile = join(dir, 'breaker.json');
    writeFileSync(configFile, JSON.stringify({ breaker: { consecutiveFailures: 1, errorRate: 1, windowMs: 30_000, minCalls: 100 } }));
    h = await startHarness({ CONFIG_FILE: configFile, MAX_ATTEMPTS: '1', BREAKER_COOLDOWN_MS: '1500' });
    const ready = await http(h.bridge, '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({
      ready: true,
      storeReachable: true,
      ports: { mqtt: h.bridge.mqttPort, http: h.bridge.httpPort },
      providers: [{ name: 'primary', circuit: 'closed' }],
    });

    h.upstream.setOptions({ errorRate: 1 });
    const device = await h.device('cam-9');
    await device.publish('normal', ask('breaks-it'));
    await device.reply('breaks-it');
    const down = await http(h.bridge, '/readyz');
    expect(down.status).toBe(503);
    expect(down.json).toMatchObject({ ready: false, providers: [{ name: 'primary', circuit: 'open', available: false }] });
    expect((await http(h.bridge, '/healthz')).status).toBe(200);

    // Once the cool-down is over the instance is ready again without any traffic, so a load
    // balancer that stopped sending it requests lets the probe through.
    await new Promise((r) => setTimeout(r, 1600));
    const again = await http(h.bridge, '/readyz');
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ providers: [{ name: 'primary', circuit: 'open', available: true }] });
  });
});
