// The soak: steady load for many minutes while the faults a plant meets come round in turn:
// the bridge killed with SIGKILL (and restarted), Redis restarted, the upstream failing for
// 20 s, a SCADA observer stopped with SIGSTOP. Every minute it prints the bridge's RSS, heap,
// open descriptors, event-loop delay p99 and Redis' memory; at the end their slopes per
// minute, and what the devices saw: lost (acknowledged, never answered), answered twice,
// answered two different ways. Exits 1 on any loss or any request answered two ways.
//
//   npm run soak -- --minutes 30 [--every 2] [--rate 20]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import mqtt, { type MqttClient } from 'mqtt';
import { hashPassword } from '../broker/auth.js';
import { startServiceProcess, type ServiceProcess } from '../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../upstream-sim/sim.js';
import { freePort } from './free-port.js';
import { startPrivateRedis, type PrivateRedis } from './redis-server.js';

const DEVICES = 8;
const PASSWORD = 'soak';
const FAULTS = ['kill -9', 'Redis restart', 'upstream outage', 'stalled subscriber'] as const;

interface Sample {
  minute: number;
  rssMb: number;
  heapMb: number;
  fds: number;
  loopP99Ms: number;
  redisMb: number;
}

interface Ledger {
  sentAt: Map<string, number>;
  acked: Set<string>;
  replies: Map<string, string[]>;
}

class Soak {
  private service!: ServiceProcess;
  private redis!: PrivateRedis;
  private upstream!: UpstreamSim;
  private observer: ChildProcess | undefined;
  private readonly devices: MqttClient[] = [];
  readonly ledger: Ledger = { sentAt: new Map(), acked: new Set(), replies: new Map() };
  private readonly dir = mkdtempSync(join(tmpdir(), 'eab-soak-'));
  private env: Record<string, string> = {};
  private mqttPort = 0;
  private redisPort = 0;

  async start(): Promise<void> {
    this.redisPort = await freePort();
    await this.startRedis();
    this.upstream = await startUpstreamSim({ port: 0, latencyMs: 50 });
    const hash = await hashPassword(PASSWORD);
    const users = [
      ...Array.from({ length: DEVICES }, (_, i) => ({ username: `soak-${i}`, password_hash: hash, role: 'device', device_id: `soak-${i}` })),
      { username: 'scada', password_hash: hash, role: 'observer' },
    ];
    writeFileSync(join(this.dir, 'auth.json'), JSON.stringify({ users }));
    this.mqttPort = await freePort();
    this.env = {
      REDIS_URL: `redis://127.0.0.1:${this.redisPort}`,
      UPSTREAM_URL: this.upstream.url,
      AUTH_FILE: join(this.dir, 'auth.json'),
      MQTT_PORT: String(this.mqttPort),
      UPSTREAM_TIMEOUT_MS: '2000',
      RATE_LIMIT_RPM: '1000000',
      DEVICE_RATE_LIMIT_RPM: '1000000',
    };
    this.service = await startServiceProcess(this.env);
    this.startObserver();
    for (let i = 0; i < DEVICES; i += 1) this.devices.push(await this.connectDevice(`soak-${i}`));
  }

  /** AOF with fsync on every write: a Redis restart keeps every acknowledged admission. */
  private async startRedis(): Promise<void> {
    this.redis = await startPrivateRedis(['--appendonly', 'yes', '--appendfsync', 'always', '--dir', this.dir], { port: this.redisPort });
  }

  private startObserver(): void {
    const args = ['-h', '127.0.0.1', '-p', String(this.mqttPort), '-u', 'scada', '-P', PASSWORD, '-q', '1', '-t', 'devices/+/result'];
    this.observer = spawn('mosquitto_sub', args, { stdio: 'ignore' });
  }

  private async connectDevice(id: string): Promise<MqttClient> {
    const client = mqtt.connect(`mqtt://127.0.0.1:${this.mqttPort}`, {
      clientId: id,
      username: id,
      password: PASSWORD,
      clean: false,
      reconnectPeriod: 200,
      connectTimeout: 2000,
    });
    client.on('error', () => undefined);
    client.on('message', (_topic, payload) => {
      const raw = payload.toString();
      const id = (JSON.parse(raw) as { id?: string }).id ?? '';
      const seen = this.ledger.replies.get(id) ?? [];
      seen.push(raw);
      this.ledger.replies.set(id, seen);
    });
    await new Promise<void>((resolve) => client.once('connect', () => resolve()));
    await client.subscribeAsync(`devices/${id}/result`, { qos: 1 });
    return client;
  }

  /** One request from device n % DEVICES; counted acknowledged on its PUBACK. */
  send(n: number): void {
    const device = this.devices[n % DEVICES] as MqttClient;
    const id = `${device.options.clientId}-r${n}`;
    this.ledger.sentAt.set(id, Date.now());
    const body = JSON.stringify({ id, messages: [{ role: 'user', content: id }] });
    device.publishAsync(`devices/${device.options.clientId}/infer/normal`, body, { qos: 1 }).then(
      () => this.ledger.acked.add(id),
      () => undefined,
    );
  }

  async fault(kind: (typeof FAULTS)[number]): Promise<void> {
    if (kind === 'kill -9') {
      this.service.child.kill('SIGKILL');
      await this.service.exited;
      this.service = await startServiceProcess(this.env);
    } else if (kind === 'Redis restart') {
      await this.redis.stop();
      await sleep(2000);
      await this.startRedis();
    } else if (kind === 'upstream outage') {
      this.upstream.setOptions({ errorRate: 1 });
      await sleep(20_000);
      this.upstream.setOptions({ errorRate: 0 });
    } else {
      this.observer?.kill('SIGSTOP');
      await sleep(30_000);
      this.observer?.kill('SIGKILL');
      this.startObserver();
    }
  }

  async sample(minute: number): Promise<Sample> {
    const text = await fetch(`http://127.0.0.1:${this.service.httpPort}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    const metric = (name: string): number => Number(new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? NaN);
    const conn = new Redis(this.redisPort, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    const info = await conn.connect().then(
      () => conn.info('memory'),
      () => '',
    );
    conn.disconnect();
    return {
      minute,
      rssMb: metric('process_resident_memory_bytes') / 2 ** 20,
      heapMb: metric('nodejs_heap_size_used_bytes') / 2 ** 20,
      fds: metric('process_open_fds'),
      loopP99Ms: metric('nodejs_eventloop_lag_p99_seconds') * 1000,
      redisMb: Number(/used_memory:(\d+)/.exec(info)?.[1] ?? NaN) / 2 ** 20,
    };
  }

  async stop(): Promise<void> {
    for (const d of this.devices) d.end(true);
    this.observer?.kill('SIGKILL');
    await this.service.stop('SIGTERM');
    await this.upstream.close();
    await this.redis.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Least-squares slope per minute of the samples after the first (warm-up) one. */
function slope(samples: Sample[], key: keyof Omit<Sample, 'minute'>): number {
  const points = samples.slice(1).filter((s) => Number.isFinite(s[key]));
  if (points.length < 2) return NaN;
  const mx = points.reduce((a, s) => a + s.minute, 0) / points.length;
  const my = points.reduce((a, s) => a + s[key], 0) / points.length;
  const num = points.reduce((a, s) => a + (s.minute - mx) * (s[key] - my), 0);
  const den = points.reduce((a, s) => a + (s.minute - mx) ** 2, 0);
  return num / den;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { minutes: { type: 'string', default: '30' }, every: { type: 'string', default: '2' }, rate: { type: 'string', default: '20' } },
  });
  const minutes = Number(values.minutes);
  const everyMs = Number(values.every) * 60_000;
  const soak = new Soak();
  await soak.start();
  const started = Date.now();
  const end = started + minutes * 60_000;
  let n = 0;
  const sender = setInterval(() => soak.send(n++), 1000 / Number(values.rate));
  const samples: Sample[] = [];
  const sampler = setInterval(() => {
    void soak.sample(samples.length + 1).then((s) => {
      samples.push(s);
      const f = (v: number): string => v.toFixed(1);
      console.log(
        `minute ${s.minute}: rss ${f(s.rssMb)} MB, heap ${f(s.heapMb)} MB, fds ${s.fds}, event-loop p99 ${f(s.loopP99Ms)} ms, redis ${f(s.redisMb)} MB`,
      );
    });
  }, 60_000);
  for (let i = 0; Date.now() + everyMs < end; i += 1) {
    await sleep(everyMs);
    const kind = FAULTS[i % FAULTS.length] as (typeof FAULTS)[number];
    console.log(`+${((Date.now() - started) / 60_000).toFixed(1)} min: ${kind}`);
    await soak.fault(kind);
  }
  await sleep(Math.max(0, end - Date.now()));
  clearInterval(sender);
  clearInterval(sampler);
  // Everything acknowledged gets its answer; the last takeovers need a lease and a reap.
  const { acked, replies } = soak.ledger;
  for (let i = 0; i < 60 && [...acked].some((id) => !replies.has(id)); i += 1) await sleep(1000);
  await soak.stop();

  const lost = [...acked].filter((id) => !replies.has(id));
  const twice = [...replies.values()].filter((r) => r.length > 1).length;
  const twoWays = [...replies.values()].filter((r) => new Set(r).size > 1).length;
  const errors = [...replies.values()].filter((r) => !(JSON.parse(r[0] as string) as { ok: boolean }).ok).length;
  const per = (key: keyof Omit<Sample, 'minute'>, unit: string): string => `${key} ${slope(samples, key).toFixed(3)} ${unit}/min`;
  console.log(
    `soak: ${minutes} min, sent ${n}, acknowledged ${acked.size}, answered ${replies.size} (error replies ${errors}), lost ${lost.length}, ` +
      `answered twice ${twice}, answered two ways ${twoWays}`,
  );
  console.log(
    `slopes: ${per('rssMb', 'MB')}, ${per('heapMb', 'MB')}, ${per('fds', 'fds')}, ${per('redisMb', 'MB')}; event-loop p99 max ${Math.max(...samples.map((s) => s.loopP99Ms).filter(Number.isFinite)).toFixed(1)} ms`,
  );
  if (lost.length > 0) console.log(`lost: ${lost.slice(0, 20).join(', ')}`);
  return lost.length > 0 || twoWays > 0 ? 1 : 0;
}

process.exitCode = await main();
