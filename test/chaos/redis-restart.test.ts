// Chaos: Redis restarts under load (a delayed restart, AOF on). A private redis-server with AOF fsync'd on every write keeps its data across
// the restart on the same port; the service must answer every acknowledged request with
// `ok` or `unavailable` (never silence), refuse readiness while Redis is away, and serve
// again once it is back, without a restart of its own.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { connectChaosDevice, readyz, waitUntil, type ChaosDevice } from '../helpers/chaos.js';
import { sleep } from '../helpers/harness.js';
import { uniquePrefix } from '../helpers/redis.js';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';

const DEVICES = 8;
const SEND_EVERY_MS = 50; // 20 requests/s across the fleet
const PHASE_MS = 2000;
const PROBE_EVERY_MS = 100;

type Phase = 'before' | 'down' | 'restarted';

let service: ServiceProcess | undefined;
let upstream: UpstreamSim | undefined;
let devices: ChaosDevice[] = [];
let redisServers: PrivateRedis[] = [];
let dataDir = '';

afterEach(async () => {
  await Promise.all(devices.map((d) => d.close().catch(() => undefined)));
  await service?.stop('SIGKILL');
  await upstream?.close();
  for (const r of redisServers) await r.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  service = undefined;
  upstream = undefined;
  devices = [];
  redisServers = [];
  dataDir = '';
});

describe('chaos: Redis restart mid-load', () => {
  it('answers every acknowledged request ok or unavailable, and serves again once Redis is back', { timeout: 30_000 }, async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'chaos-redis-'));
    const redisArgs = ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', dataDir];
    const first = await startPrivateRedis(redisArgs);
    redisServers.push(first);
    upstream = await startUpstreamSim({ port: 0, latencyMs: 100 });
    service = await startServiceProcess({
      REDIS_URL: first.url,
      REDIS_PREFIX: uniquePrefix('chaos-redis'),
      UPSTREAM_URL: upstream.url,
      UPSTREAM_TIMEOUT_MS: '2000',
      MAX_CONCURRENCY: '16',
      RATE_LIMIT_RPM: '100000',
      DEVICE_RATE_LIMIT_RPM: '100000',
    });
    const { httpPort } = service;
    expect(await readyz(httpPort)).toBe(200);

    const tag = randomBytes(3).toString('hex');
    devices = await Promise.all(
      Array.from({ length: DEVICES }, (_, i) => connectChaosDevice(service!.mqttPort, `redis-${tag}-${i}`, { clean: false, reconnectPeriod: 200 })),
    );

    // Readiness, sampled throughout.
    const probes: Array<{ at: number; status: number }> = [];
    let probing = true;
    const prober = (async () => {
      while (probing) {
        probes.push({ at: Date.now(), status: await readyz(httpPort) });
        await sleep(PROBE_EVERY_MS);
      }
    })();

    let phase: Phase = 'before';
    const sent = new Map<string, { device: ChaosDevice; phase: Phase; at: number }>();
    const acknowledged = new Map<string, number>(); // id → ack time
    let sending = true;
    const sender = (async () => {
      for (let n = 0; sending; n += 1) {
        const device = devices[n % DEVICES] as ChaosDevice;
        const id = `${device.deviceId}-r${n}`;
        sent.set(id, { device, phase, at: Date.now() });
        device.publish('normal', { id, messages: [{ role: 'user', content: id }] }).then(
          () => acknowledged.set(id, Date.now()),
          () => undefined, // never acknowledged: not counted
        );
        await sleep(SEND_EVERY_MS);
      }
    })();

    await sleep(PHASE_MS);
    phase = 'down';
    const downAt = Date.now();
    await first.stop(); // SIGTERM: Redis fsyncs its AOF and exits
    await sleep(PHASE_MS);
    const second = await startPrivateRedis(redisArgs, { port: first.port });
    redisServers.push(second);
    const upAt = Date.now();
    phase = 'restarted';
    await sleep(PHASE_MS);
    sending = false;
    await sender;
    const lastSentAt = Date.now();

    // Ready again (the service was not restarted): the first 200 after Redis came back.
    const readyAgain = await waitUntil(() => probes.some((p) => p.at >= upAt && p.status === 200), 10_000);
    const readyAgainAt = probes.find((p) => p.at >= upAt && p.status === 200)?.at ?? Infinity;

    const repliesOf = (id: string) => sent.get(id)!.device.replies.filter((r) => r.id === id);
    const answered = (id: string): boolean => repliesOf(id).length > 0;
    await waitUntil(() => [...acknowledged.keys()].every(answered), 15_000, 100);
    probing = false;
    await prober;

    const acked = [...acknowledged.keys()];
    const missing = acked.filter((id) => !answered(id));
    const replies = acked.flatMap((id) => repliesOf(id));
    const codeOf = (r: { ok: boolean; code: string | undefined }): string => (r.ok ? 'ok' : (r.code ?? 'malformed'));
    const byCode: Record<string, number> = {};
    for (const r of replies) byCode[codeOf(r)] = (byCode[codeOf(r)] ?? 0) + 1;
    const wrong = replies.filter((r) => !['ok', 'unavailable'].includes(codeOf(r)));
    const duplicates = acked.reduce((n, id) => n + Math.max(0, repliesOf(id).length - 1), 0);
    const byPhase = (p: Phase) => acked.filter((id) => sent.get(id)!.phase === p);
    const unavailableWhileDown = byPhase('down').filter((id) => repliesOf(id).some((r) => codeOf(r) === 'unavailable'));
    // Sent once the service said it was ready again: these must be served normally.
    const afterReady = acked.filter((id) => sent.get(id)!.at >= readyAgainAt);
    const afterReadyNotOk = afterReady.filter((id) => !repliesOf(id).every((r) => r.ok));
    const notReadyWhileDown = probes.filter((p) => p.at >= downAt + 200 && p.at < upAt && p.status === 503);
    const neverAcked = [...sent.keys()].filter((id) => !acknowledged.has(id));
    const unavailableByPhase = Object.fromEntries(
      (['before', 'down', 'restarted'] as const).map((p) => [p, byPhase(p).filter((id) => repliesOf(id).some((r) => codeOf(r) === 'unavailable')).length]),
    );

    console.log(
      `[chaos redis] sent ${sent.size} (before ${[...sent.values()].filter((s) => s.phase === 'before').length}, ` +
        `down ${[...sent.values()].filter((s) => s.phase === 'down').length}, restarted ${[...sent.values()].filter((s) => s.phase === 'restarted').length}), ` +
        `acknowledged ${acked.length}, never acknowledged ${neverAcked.length}, answered ${acked.length - missing.length}, ` +
        `missing ${missing.length}, duplicates ${duplicates}, replies by code ${JSON.stringify(byCode)}, ` +
        `unavailable by phase sent ${JSON.stringify(unavailableByPhase)}; ` +
        `sent while down: ${byPhase('down').length} acknowledged, ${unavailableWhileDown.length} unavailable; ` +
        `ready again ${readyAgainAt - upAt} ms after Redis restarted; ${afterReady.length} sent after that ` +
        `(${afterReadyNotOk.length} not ok); /readyz 503 while down: ${notReadyWhileDown.length} probes; ` +
        `last send ${lastSentAt - upAt} ms after restart`,
    );
    if (missing.length > 0 || wrong.length > 0 || afterReadyNotOk.length > 0) {
      console.log(
        '[chaos redis] missing',
        missing.slice(0, 10),
        'wrong',
        wrong.slice(0, 5),
        'after ready not ok',
        afterReadyNotOk.slice(0, 5).map((id) => repliesOf(id)),
      );
    }

    expect(missing).toEqual([]);
    expect(wrong).toEqual([]);
    expect(unavailableWhileDown.length).toBeGreaterThan(0);
    expect(notReadyWhileDown.length).toBeGreaterThan(0);
    expect(readyAgain).toBe(true);
    expect(afterReady.length).toBeGreaterThan(0);
    expect(afterReadyNotOk).toEqual([]);
    expect(await readyz(httpPort)).toBe(200);
  });
});
