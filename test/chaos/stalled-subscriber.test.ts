// Chaos: a SCADA observer subscribed to every device's results at QoS 1, in its own process
// (mosquitto_sub over TCP, an mqtt.js script over WebSocket), stopped with SIGSTOP so its
// socket fills and it never acknowledges, while devices keep asking for large answers. The
// devices must not wait on it (Aedes used to hold every publish until that socket drained),
// its backlog stays bounded, and it is dropped with a log line and a metric once over
// MAX_CLIENT_BACKLOG_BYTES or DRAIN_TIMEOUT_MS.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { connectChaosDevice, waitUntil, type ChaosDevice } from '../helpers/chaos.js';
import { tempDir, writeAuthFile } from '../helpers/security.js';

const PASSWORD = 'stalled-observer';
const DEVICES = 4;
/** Large replies fill the stopped observer's kernel buffers within a few hundred requests. */
const REPLY_BYTES = 40_000;
const REQUESTS = 240;

type Transport = 'tcp' | 'ws';

const WS_OBSERVER = `
import mqtt from 'mqtt';
let n = 0;
const c = mqtt.connect(process.argv[1], { clientId: 'scada', username: 'scada', password: process.argv[2], reconnectPeriod: 0 });
c.on('connect', () => c.subscribe('devices/+/result', { qos: 1 }, () => console.log('subscribed')));
c.on('message', () => console.log('message ' + ++n));
c.on('close', () => console.log('closed'));
`;

interface Observer {
  child: ChildProcess;
  /** Results received so far. */
  received(): number;
  closed(): boolean;
}

/** The observer in its own process; resolves once it is subscribed (it prints one line per result). */
async function startObserver(transport: Transport, port: number): Promise<Observer> {
  const child =
    transport === 'tcp'
      ? // -d prints "Subscribed (mid: 1): 1" on SUBACK; stdbuf makes its stdout line-buffered, so the line comes then.
        spawn('stdbuf', [
          '-oL',
          'mosquitto_sub',
          '-d',
          '-h',
          '127.0.0.1',
          '-p',
          String(port),
          '-u',
          'scada',
          '-P',
          PASSWORD,
          '-i',
          'scada',
          '-q',
          '1',
          '-t',
          'devices/+/result',
          '-F',
          'message %t',
        ])
      : spawn(process.execPath, ['--input-type=module', '-e', WS_OBSERVER, `ws://127.0.0.1:${port}`, PASSWORD], { cwd: process.cwd() });
  let received = 0;
  let closed = false;
  let subscribed = false;
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop() ?? '';
    for (const line of lines) {
      if (line.startsWith('message')) received += 1;
      else if (line === 'subscribed' || line.startsWith('Subscribed (mid:')) subscribed = true;
      else if (line === 'closed') closed = true;
    }
  });
  child.once('exit', () => (closed = true));
  // On SUBACK: Aedes sends it once the subscription is in place.
  if (!(await waitUntil(() => subscribed, 5000))) throw new Error(`the ${transport} observer never subscribed`);
  return { child, received: () => received, closed: () => closed };
}

let cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

interface Plant {
  service: ServiceProcess;
  devices: ChaosDevice[];
  observer: Observer;
}

async function startPlant(transport: Transport, env: Record<string, string>): Promise<Plant> {
  const dir = tempDir('eab-stall-');
  cleanups.push(() => dir.remove());
  const upstream: UpstreamSim = await startUpstreamSim({ port: 0, latencyMs: 20, answerBytes: REPLY_BYTES });
  cleanups.push(() => upstream.close());
  const ids = Array.from({ length: DEVICES }, (_, i) => `cam-${i}`);
  const users = [
    ...ids.map((id) => ({ username: id, password: PASSWORD, role: 'device' as const, device_id: id })),
    { username: 'scada', password: PASSWORD, role: 'observer' as const },
  ];
  await writeAuthFile(join(dir.path, 'auth.json'), users);
  const service = await startServiceProcess({
    UPSTREAM_URL: upstream.url,
    AUTH_FILE: join(dir.path, 'auth.json'),
    MQTT_WS_PORT: '0',
    RATE_LIMIT_RPM: '1000000',
    DEVICE_RATE_LIMIT_RPM: '1000000',
    ...env,
  });
  cleanups.push(() => service.stop('SIGKILL'));
  const ready = service.logs.find((l) => l.msg === 'bridge ready');
  const observer = await startObserver(transport, transport === 'tcp' ? service.mqttPort : Number(ready?.mqttWsPort));
  cleanups.push(() => observer.child.kill('SIGKILL'));
  const devices = await Promise.all(
    ids.map((id) => connectChaosDevice(service.mqttPort, id, { clean: true, reconnectPeriod: 0, username: id, password: PASSWORD })),
  );
  cleanups.push(() => Promise.all(devices.map((d) => d.close())));
  return { service, devices, observer };
}

const SEND_EVERY_MS = 10;

/** Sends `count` requests round-robin over the devices, one every SEND_EVERY_MS; resolves with their ids. */
async function load(devices: ChaosDevice[], count: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const id = `${tag}-${i}`;
    ids.push(id);
    void (devices[i % devices.length] as ChaosDevice).publish('normal', { id, messages: [{ role: 'user', content: `question ${id}` }] });
    await sleep(SEND_EVERY_MS);
  }
  return ids;
}

const answered = (devices: ChaosDevice[], ids: string[]): number => {
  const seen = new Set(devices.flatMap((d) => d.replies.filter((r) => r.ok).map((r) => r.id)));
  return ids.filter((id) => seen.has(id)).length;
};

async function droppedMetric(service: ServiceProcess, reason: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${service.httpPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`edge_ai_bridge_mqtt_clients_dropped_total{reason="${reason}"}`));
  return Number(line?.split(' ')[1] ?? NaN);
}

describe.each<Transport>(['tcp', 'ws'])('chaos: a stalled SCADA subscriber over %s', (transport) => {
  it('costs the devices nothing while it stays connected, and gets its whole backlog once it reads again', { timeout: 60_000 }, async () => {
    // Limits far above what the test sends: the observer stays connected, stalled, throughout.
    const { devices, observer } = await startPlant(transport, { DRAIN_TIMEOUT_MS: '120000', MAX_CLIENT_BACKLOG_BYTES: String(512 * 1024 * 1024) });
    observer.child.kill('SIGSTOP');
    const ids = await load(devices, REQUESTS, 'stalled'); // ~10 MB for the observer, more than its socket buffers hold
    // Before the fix every reply waited for the observer's socket to drain: none came.
    expect(await waitUntil(() => answered(devices, ids) === REQUESTS, 10_000)).toBe(true);
    expect(observer.closed()).toBe(false);
    observer.child.kill('SIGCONT');
    // Nothing it was sent was dropped: the backlog was buffered, bounded, not discarded.
    expect(await waitUntil(() => observer.received() >= REQUESTS, 15_000)).toBe(true);
  });

  it('is dropped once its socket stays full for DRAIN_TIMEOUT_MS: logged by client id, counted, the devices answered', { timeout: 60_000 }, async () => {
    const { service, devices, observer } = await startPlant(transport, { DRAIN_TIMEOUT_MS: '500' });
    observer.child.kill('SIGSTOP');
    const ids = await load(devices, REQUESTS, 'drain');
    expect(await waitUntil(() => answered(devices, ids) === REQUESTS, 10_000)).toBe(true);
    const dropped = () => service.logs.find((l) => l.msg === 'connection dropped: not drained within DRAIN_TIMEOUT_MS');
    expect(await waitUntil(() => dropped() !== undefined, 5000)).toBe(true);
    expect(dropped()).toMatchObject({ level: 40, clientId: 'scada', reason: 'drain_timeout' });
    expect(await droppedMetric(service, 'drain_timeout')).toBe(1);
  });

  it('is dropped at once when its backlog passes MAX_CLIENT_BACKLOG_BYTES', { timeout: 60_000 }, async () => {
    const { service, devices, observer } = await startPlant(transport, { DRAIN_TIMEOUT_MS: '120000', MAX_CLIENT_BACKLOG_BYTES: String(1024 * 1024) });
    observer.child.kill('SIGSTOP');
    const ids = await load(devices, REQUESTS, 'backlog');
    expect(await waitUntil(() => answered(devices, ids) === REQUESTS, 10_000)).toBe(true);
    const dropped = () => service.logs.find((l) => l.msg === 'connection dropped: outgoing backlog over MAX_CLIENT_BACKLOG_BYTES');
    expect(await waitUntil(() => dropped() !== undefined, 5000)).toBe(true);
    expect(dropped()).toMatchObject({ clientId: 'scada', reason: 'backlog' });
    expect(await droppedMetric(service, 'backlog')).toBe(1);
  });
});
