// Isolation, finding "the overload guard sheds a light load on a busy machine": while another
// program took the CPU, a bridge serving 8 requests/s answered `queue_full` because its event
// loop was late, though it had no backlog of its own. Here the machine's scheduler is played by
// SIGSTOP/SIGCONT: the bridge process (Redis store, OVERLOAD_DELAY_MS 100) is stopped 300 ms of
// every 400, so its loop is ~300 ms late in window after window, as when it waits for a core,
// while it is asked 8 requests/s. Every request must be answered ok (none shed) and the delay
// must have been seen (the event-loop delay gauge over the threshold after a stop). A real overload, the
// loop busy with the bridge's own work, is still shed: test/e2e/overload.test.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../../device-sim/service-process.js';
import { startUpstreamSim } from '../../../upstream-sim/sim.js';
import { parsePrometheus, sampleValue } from '../../helpers/admin-http.js';
import { chaosScene, connectChaosDevice, readyz, waitUntil } from '../../helpers/chaos.js';
import { connectRedis, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';

const redis = connectRedis();
const scene = chaosScene(redis);
const REQUESTS = 32;
const EVERY_MS = 125; // 8 requests/s
const STOPPED_MS = 300;
const RUNNING_MS = 100;

/** The last window's event-loop delay the bridge reports, in ms (0 when the scrape fails). */
async function reportedDelayMs(httpPort: number): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${httpPort}/metrics`, { signal: AbortSignal.timeout(2000) });
    return sampleValue(parsePrometheus(await res.text()), 'edge_ai_bridge_event_loop_delay_seconds') * 1000;
  } catch {
    return 0;
  }
}

/** Stops and continues the process like a scheduler that gives its core to someone else, until `running()` is false. */
async function starve(service: ServiceProcess, running: () => boolean): Promise<void> {
  while (running()) {
    service.child.kill('SIGSTOP');
    await sleep(STOPPED_MS);
    service.child.kill('SIGCONT');
    await sleep(RUNNING_MS);
  }
}

describe('isolation: a light load on a busy machine', () => {
  it('is not shed while the loop is late only because the process waits for the CPU', { timeout: 60_000 }, async () => {
    const prefix = (scene.prefix = uniquePrefix('iso-busy'));
    const upstream = (scene.upstream = await startUpstreamSim({ port: 0, latencyMs: 20 }));
    const bridge = await startServiceProcess({ REDIS_URL, REDIS_PREFIX: prefix, UPSTREAM_URL: upstream.url, OVERLOAD_DELAY_MS: '100' });
    scene.services.push(bridge);
    const device = await connectChaosDevice(bridge.mqttPort, 'iso-busy-cam', { clean: true, reconnectPeriod: 0 });
    scene.devices.push(device);

    let sending = true;
    const starving = starve(bridge, () => sending);
    const ids: string[] = [];
    for (let n = 0; n < REQUESTS; n += 1) {
      const id = `busy-${n}`;
      ids.push(id);
      device.publish('normal', { id, messages: [{ role: 'user', content: id }] }).catch(() => undefined); // the reply is the point
      await sleep(EVERY_MS);
    }
    sending = false;
    await starving;
    // One more stop: the window after it, the gauge's last, was late by about as long.
    bridge.child.kill('SIGSTOP');
    await sleep(STOPPED_MS);
    bridge.child.kill('SIGCONT');
    const lateMs = await reportedDelayMs(bridge.httpPort);

    expect(await waitUntil(() => ids.every((id) => device.replies.some((r) => r.id === id)), 10_000)).toBe(true);
    const refused = device.replies.filter((r) => !r.ok).map((r) => `${String(r.id)}: ${r.code ?? r.raw}`);
    expect(refused).toEqual([]);
    // The loop was late over OVERLOAD_DELAY_MS, as on the busy machine.
    expect(lateMs).toBeGreaterThan(100);
    expect(bridge.logs.filter((l) => l.msg === 'shedding load')).toEqual([]);
    expect(await readyz(bridge.httpPort)).toBe(200);
  });
});
