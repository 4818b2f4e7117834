// What one stalled SCADA subscriber costs the devices: four devices send 50 requests/s between
// them, each reply ~10 KB; an observer subscribed to `devices/+/result` at QoS 1 runs in its
// own process (mosquitto_sub over TCP, an mqtt.js script over WebSocket) and is stopped with
// SIGSTOP after a baseline, so its socket fills and it never acknowledges. Prints the devices'
// reply latency p99 before and during the stall, and whether (and why) the bridge dropped it.
//
//   node dist/bench/stalled-subscriber.js [--transport tcp|ws] [--seconds 14] [--runs 1]
//   extra bridge variables: BENCH_ENV='{"DRAIN_TIMEOUT_MS":"60000"}'
//   another build of the bridge: BENCH_BRIDGE=/path/to/dist/bridge/main.js
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import mqtt, { type MqttClient } from 'mqtt';
import { hashPassword } from '../broker/auth.js';
import { startServiceProcess } from '../device-sim/service-process.js';
import { startUpstreamSim } from '../upstream-sim/sim.js';

const DEVICES = 4;
const INTERVAL_MS = 20; // 50 requests/s over all devices
const REPLY_BYTES = 10_000;
const PASSWORD = 'stall-bench';

interface RunResult {
  baselineP99: number;
  stalledP99: number;
  lastP99: number;
  unanswered: number;
  dropped: string[];
}

const WS_OBSERVER = `
import mqtt from 'mqtt';
const c = mqtt.connect(process.argv[1], { clientId: 'scada-ws', username: 'scada', password: process.argv[2], reconnectPeriod: 0 });
c.on('connect', () => c.subscribe('devices/+/result', { qos: 1 }, () => console.log('subscribed')));
c.on('message', () => {});
`;

function observer(transport: 'tcp' | 'ws', port: number): ChildProcess {
  if (transport === 'tcp') {
    const args = ['-h', '127.0.0.1', '-p', String(port), '-u', 'scada', '-P', PASSWORD, '-i', 'scada-tcp', '-q', '1', '-t', 'devices/+/result'];
    return spawn('mosquitto_sub', args, { stdio: ['ignore', 'ignore', 'inherit'] });
  }
  return spawn(process.execPath, ['--input-type=module', '-e', WS_OBSERVER, `ws://127.0.0.1:${port}`, PASSWORD], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

function p99(latencies: Array<[number, number]>, from: number, to: number): number {
  const xs = latencies
    .filter(([t]) => t >= from && t < to)
    .map(([, l]) => l)
    .sort((a, b) => a - b);
  return xs.length === 0 ? NaN : (xs[Math.min(xs.length - 1, Math.floor(xs.length * 0.99))] as number);
}

async function connectDevice(port: number, id: string): Promise<MqttClient> {
  const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { clientId: id, username: id, password: PASSWORD, reconnectPeriod: 0 });
  await new Promise<void>((resolve, reject) => {
    c.once('connect', () => resolve());
    c.once('error', reject);
  });
  await c.subscribeAsync(`devices/${id}/result`, { qos: 1 });
  return c;
}

async function run(transport: 'tcp' | 'ws', seconds: number, extraEnv: Record<string, string>): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'eab-stall-'));
  const upstream = await startUpstreamSim({ port: 0, latencyMs: 20, answerBytes: REPLY_BYTES });
  const hash = await hashPassword(PASSWORD);
  const ids = Array.from({ length: DEVICES }, (_, i) => `cam-${i}`);
  const users = [
    ...ids.map((id) => ({ username: id, password_hash: hash, role: 'device', device_id: id })),
    { username: 'scada', password_hash: hash, role: 'observer' },
  ];
  writeFileSync(join(dir, 'auth.json'), JSON.stringify({ users }));
  const service = await startServiceProcess(
    {
      UPSTREAM_URL: upstream.url,
      AUTH_FILE: join(dir, 'auth.json'),
      // Limits far above the offered rate: every reply is a full answer.
      RATE_LIMIT_RPM: '1000000',
      DEVICE_RATE_LIMIT_RPM: '1000000',
      ...(transport === 'ws' ? { MQTT_WS_PORT: '0' } : {}),
      ...extraEnv,
    },
    process.env.BENCH_BRIDGE ? { script: process.env.BENCH_BRIDGE } : {},
  );
  const wsPort = service.logs.find((l) => l.msg === 'bridge ready')?.mqttWsPort;
  const watcher = observer(transport, transport === 'ws' ? Number(wsPort) : service.mqttPort);
  const devices: MqttClient[] = [];
  try {
    await sleep(1000);
    devices.push(...(await Promise.all(ids.map((id) => connectDevice(service.mqttPort, id)))));
    const sent = new Map<string, number>();
    const latencies: Array<[number, number]> = [];
    for (const d of devices) {
      d.on('message', (_topic, message) => {
        const id = (JSON.parse(message.toString()) as { id: string }).id;
        const at = sent.get(id);
        if (at === undefined) return;
        sent.delete(id);
        latencies.push([at, Date.now() - at]);
      });
    }
    let n = 0;
    const timer = setInterval(() => {
      const device = devices[n % DEVICES] as MqttClient;
      const id = `r${n++}`;
      sent.set(id, Date.now());
      const body = JSON.stringify({ id, messages: [{ role: 'user', content: `question ${id}` }] });
      device.publish(`devices/${device.options.clientId}/infer/normal`, body, { qos: 1 });
    }, INTERVAL_MS);
    const start = Date.now();
    await sleep(5000);
    const stalledAt = Date.now();
    watcher.kill('SIGSTOP');
    await sleep(seconds * 1000);
    const end = Date.now();
    clearInterval(timer);
    await sleep(3000);
    const dropped = service.logs.filter((l) => /connection dropped/.test(String(l.msg))).map((l) => `${String(l.clientId)}: ${String(l.reason)}`);
    return {
      baselineP99: p99(latencies, start + 1000, stalledAt),
      stalledP99: p99(latencies, stalledAt, end),
      lastP99: p99(latencies, end - 5000, end),
      unanswered: sent.size,
      dropped,
    };
  } finally {
    watcher.kill('SIGKILL');
    for (const d of devices) d.end(true);
    await service.stop('SIGTERM');
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { transport: { type: 'string', default: 'tcp' }, seconds: { type: 'string', default: '14' }, runs: { type: 'string', default: '1' } },
  });
  const transport = values.transport === 'ws' ? 'ws' : 'tcp';
  const extraEnv = JSON.parse(process.env.BENCH_ENV ?? '{}') as Record<string, string>;
  for (let i = 0; i < Number(values.runs); i += 1) {
    const r = await run(transport, Number(values.seconds), extraEnv);
    const ms = (v: number): string => (Number.isNaN(v) ? '—' : `${v} ms`);
    console.log(
      `${transport}: p99 baseline ${ms(r.baselineP99)} · stalled ${ms(r.stalledP99)} · last 5 s ${ms(r.lastP99)} · unanswered ${r.unanswered} · dropped ${r.dropped.join(', ') || 'none'}`,
    );
  }
}

await main();
