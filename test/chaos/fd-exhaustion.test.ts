// Chaos: connection churn and file-descriptor exhaustion. The service runs with its open-files
// limit lowered to 256 (prlimit) while a device keeps asking: 400 idle connections are held
// open (more than it may have: accepts fail with EMFILE), then released; then 5 000
// connect/subscribe/disconnect cycles, some abandoned in the middle of their CONNECT. It must
// not crash, must serve the device throughout, accept again once descriptors free up, and
// come back near its starting descriptor count and memory.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { connectChaosDevice, waitUntil, type ChaosDevice } from '../helpers/chaos.js';
import { quietFor, readUntil } from '../helpers/wait.js';
import { connectPacket, PacketType, RawClient, subscribePacket } from '../helpers/raw-mqtt.js';

const FD_LIMIT = 256;
const HELD = 400;
const CYCLES = 5000;
const PARALLEL = 25;
/** The device's pace while the descriptors run out and churn. */
const ASK_EVERY_MS = 50;

let service: ServiceProcess | undefined;
let upstream: UpstreamSim | undefined;
let device: ChaosDevice | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await device?.close().catch(() => undefined);
  await service?.stop('SIGKILL');
  await upstream?.close();
  service = upstream = device = undefined;
});

const fds = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;
const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** One connect → CONNECT → SUBSCRIBE → DISCONNECT cycle; every fifth is abandoned mid-CONNECT. */
async function cycle(port: number, n: number): Promise<void> {
  if (n % 5 === 0) {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      socket.write(connectPacket(`churn-${n}`).subarray(0, 7)); // half a CONNECT, then gone
      socket.destroy();
    });
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    return;
  }
  const raw = await RawClient.connected(port, `churn-${n}`);
  raw.send(subscribePacket(1, [`devices/churn-${n}/result`], 1));
  await raw.next(PacketType.SUBACK);
  raw.send(Buffer.from([0xe0, 0x00])); // DISCONNECT
  await raw.closedWithin(2000);
  raw.destroy();
}

describe('chaos: file descriptors run out', () => {
  it('survives EMFILE and 5 000 connection cycles under a 256-descriptor limit, serving a device throughout', { timeout: 120_000 }, async () => {
    upstream = await startUpstreamSim({ port: 0, latencyMs: 20 });
    service = await startServiceProcess({ UPSTREAM_URL: upstream.url, RATE_LIMIT_RPM: '100000', DEVICE_RATE_LIMIT_RPM: '100000' });
    const pid = service.child.pid as number;
    execFileSync('prlimit', [`--pid=${pid}`, `--nofile=${FD_LIMIT}:${FD_LIMIT}`]);
    const port = service.mqttPort;
    device = await connectChaosDevice(port, 'fd-device', { clean: true, reconnectPeriod: 0 });
    // Warm up (upstream connections, JIT) before the baseline is read.
    let n = 0;
    const ask = async (): Promise<void> => {
      const id = `q-${n++}`;
      await device!.publish('high', { id, messages: [{ role: 'user', content: id }] });
    };
    for (let i = 0; i < 20; i += 1) await ask();
    await waitUntil(() => device!.replies.length >= 20, 5000);
    // No event says the warm-up's sockets have all opened or closed: a quiet moment before the baseline.
    await quietFor(500);
    const start = { fds: fds(pid), rss: rssMb(pid) };

    let asking = true;
    const asker = (async () => {
      while (asking) {
        await ask().catch(() => undefined);
        await sleep(ASK_EVERY_MS);
      }
    })();

    // More connections than the process may hold: the last ones are accepted late or never.
    for (let i = 0; i < HELD; i += 1) {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      sockets.push(socket);
    }
    await waitUntil(() => fds(pid) > FD_LIMIT - 20, 5000);
    const atLimit = fds(pid);
    expect(atLimit).toBeGreaterThan(FD_LIMIT - 20); // the limit was reached: accepts fail with EMFILE
    expect(atLimit).toBeLessThanOrEqual(FD_LIMIT);
    const repliesWhileFull = device.replies.length;
    await waitUntil(() => device!.replies.length > repliesWhileFull, 1000);
    expect(device.replies.length).toBeGreaterThan(repliesWhileFull); // still served while at the limit
    for (const s of sockets.splice(0)) s.destroy();

    // The listener accepts again once descriptors are free.
    const fresh = await RawClient.connected(port, 'after-emfile');
    fresh.destroy();

    for (let done = 0; done < CYCLES; done += PARALLEL) {
      await Promise.all(Array.from({ length: PARALLEL }, (_, i) => cycle(port, done + i)));
    }
    asking = false;
    await asker;
    const sentCount = n;
    await waitUntil(() => new Set(device!.replies.map((r) => r.id)).size >= sentCount, 10_000);
    // Back near the start once the churn's sockets are closed (within 2 s).
    const near = (e: { fds: number; rss: number }): boolean => e.fds <= start.fds + 5 && e.rss < start.rss + 64;
    const end = await readUntil(async () => ({ fds: fds(pid), rss: rssMb(pid) }), near, 2000, 100);
    console.log(
      `[chaos fds] limit ${FD_LIMIT}, held ${HELD}, cycles ${CYCLES}; device asked ${sentCount}, answered ${new Set(device.replies.map((r) => r.id)).size}; ` +
        `fds ${start.fds} → ${end.fds}, RSS ${start.rss.toFixed(0)} → ${end.rss.toFixed(0)} MB`,
    );
    expect(service.child.exitCode).toBeNull();
    expect(new Set(device.replies.filter((r) => r.ok).map((r) => r.id)).size).toBe(sentCount);
    expect(end.fds).toBeLessThanOrEqual(start.fds + 5);
    expect(end.rss).toBeLessThan(start.rss + 64);
  });
});
