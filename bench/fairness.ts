// One chatty device against nine polite ones, in one priority class: a camera floods 500
// `normal` requests at once, nine devices send 5 each right after it, the bridge has 2 slots
// and the upstream answers in 100 ms. Prints, per store, the completion time (publish to
// reply) of the nine devices' requests and of the flood's, median and spread over the runs.
// With --bridges, builds are compared run by run (e.g. fair share against a build without).
//
//   node dist/bench/fairness.js [--runs 3] [--stores memory,redis] [--flood 500]
//     [--bridges fair=dist/bridge/main.js,fifo=/path/to/other/dist/bridge/main.js]
//   Redis: REDIS_URL (default redis://127.0.0.1:6379), under a prefix of its own.
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import mqtt, { type MqttClient } from 'mqtt';
import { deleteDeployment } from '../bridge/store/redis-keys.js';
import { startServiceProcess } from '../device-sim/service-process.js';
import { startUpstreamSim } from '../upstream-sim/sim.js';

const { values } = parseArgs({ options: { runs: { type: 'string' }, stores: { type: 'string' }, flood: { type: 'string' }, bridges: { type: 'string' } } });
const RUNS = Number(values.runs ?? 3);
const STORES = (values.stores ?? 'memory,redis').split(',');
const FLOOD = Number(values.flood ?? 500);
const POLITE = 9;
const EACH = 5;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** label → the bridge's main.js; undefined: this build's. */
const BRIDGES: Array<[string, string | undefined]> = values.bridges
  ? values.bridges.split(',').map((b) => b.split('=') as [string, string])
  : [['this build', undefined]];

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

interface Run {
  polite: number[];
  flood: number[];
}

/** Connects a device that records, per request id, publish-to-reply milliseconds. */
async function device(url: string, id: string, done: Map<string, number>, sent: Map<string, number>): Promise<MqttClient> {
  const client = await mqtt.connectAsync(url, { clientId: id, clean: true, reconnectPeriod: 0 });
  await client.subscribeAsync(`devices/${id}/result`, { qos: 1 });
  client.on('message', (_topic, payload) => {
    const reply = JSON.parse(payload.toString()) as { id: string };
    const at = sent.get(`${id}/${reply.id}`);
    if (at !== undefined) done.set(`${id}/${reply.id}`, performance.now() - at);
  });
  return client;
}

async function oneRun(store: string, script: string | undefined): Promise<Run> {
  const upstream = await startUpstreamSim({ port: 0, latencyMs: 100 });
  const prefix = `bench-fair-${randomBytes(4).toString('hex')}`;
  const env: Record<string, string> = {
    UPSTREAM_URL: upstream.url,
    MAX_CONCURRENCY: '2',
    RATE_LIMIT_RPM: '1000000',
    DEVICE_RATE_LIMIT_RPM: '1000000',
    CACHE_TTL_S: '0',
    ...(store === 'redis' ? { REDIS_URL, REDIS_PREFIX: prefix } : {}),
  };
  const service = await startServiceProcess(env, script === undefined ? {} : { script });
  const url = `mqtt://127.0.0.1:${service.mqttPort}`;
  const sent = new Map<string, number>();
  const done = new Map<string, number>();
  const flooder = await device(url, 'flood-cam', done, sent);
  const polite = await Promise.all(Array.from({ length: POLITE }, (_, i) => device(url, `polite-${i}`, done, sent)));
  const publish = (client: MqttClient, id: string, rid: string): Promise<unknown> => {
    sent.set(`${id}/${rid}`, performance.now());
    return client.publishAsync(`devices/${id}/infer/normal`, JSON.stringify({ id: rid, messages: [{ role: 'user', content: `${id} ${rid}` }] }), { qos: 1 });
  };
  const flood = Array.from({ length: FLOOD }, (_, i) => publish(flooder, 'flood-cam', `f${i}`));
  const others = polite.flatMap((c, d) => Array.from({ length: EACH }, (_, i) => publish(c, `polite-${d}`, `p${i}`)));
  await Promise.all([...flood, ...others]);
  const total = FLOOD + POLITE * EACH;
  const deadline = performance.now() + (total * 100) / 2 + 30_000;
  while (done.size < total && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (done.size < total) log(`  ${total - done.size} requests unanswered`);
  const times = (prefix: string): number[] => [...done].filter(([k]) => k.startsWith(prefix)).map(([, ms]) => ms);
  await Promise.all([flooder, ...polite].map((c) => c.endAsync()));
  await service.stop('SIGTERM');
  await upstream.close();
  if (store === 'redis') {
    const redis = new Redis(REDIS_URL);
    await deleteDeployment(redis, prefix);
    redis.disconnect();
  }
  return { polite: times('polite-'), flood: times('flood-cam/') };
}

const percentile = (xs: number[], p: number): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};
const median = (xs: number[]): number => percentile(xs, 50);
const cell = (xs: number[]): string => `${(median(xs) / 1000).toFixed(2)} (${(Math.min(...xs) / 1000).toFixed(2)}–${(Math.max(...xs) / 1000).toFixed(2)})`;

const lines = [
  `| build | store | nine devices p50, s | nine devices p99, s | flooding device p50, s | flooding device p99, s |`,
  '| --- | --- | --- | --- | --- | --- |',
];
for (const store of STORES) {
  const runs = new Map<string, Run[]>(BRIDGES.map(([label]) => [label, []]));
  for (let r = 0; r < RUNS; r += 1) {
    for (const [label, script] of BRIDGES) {
      log(`${label}, ${store}: run ${r + 1} of ${RUNS}`);
      runs.get(label)?.push(await oneRun(store, script));
    }
  }
  for (const [label, of] of runs) {
    const fig = (f: (run: Run) => number): string => cell(of.map(f));
    lines.push(
      `| ${label} | ${store} | ${fig((r) => percentile(r.polite, 50))} | ${fig((r) => percentile(r.polite, 99))} | ${fig((r) => percentile(r.flood, 50))} | ${fig((r) => percentile(r.flood, 99))} |`,
    );
  }
}
process.stdout.write(`${lines.join('\n')}\n`);
