// Raw camera images against the same image as base64 inside a JSON chat request: what each
// form costs the camera (bytes to send, a step to build them) and the bridge (CPU per request,
// latency to the reply). Both ask the upstream the same question about the same image; per
// rate, each form runs on a fresh bridge, one after the other in one run, so both see the same
// machine. Prints the median and spread over the runs as Markdown on stdout, progress on stderr.
//
//   node dist/bench/images.js [--kb 100] [--rates 20,100] [--seconds 10] [--runs 3]
//   another build of the bridge: BENCH_BRIDGE=/path/to/dist/bridge/main.js
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import mqtt, { type MqttClient } from 'mqtt';
import { startServiceProcess } from '../device-sim/service-process.js';
import { startUpstream } from './e2e/upstream.js';
import { cpuSeconds } from './proc.js';
import { drain, paced } from './pacing.js';
import { pct, runsTable, type RowFormat } from './runs-table.js';

const DEVICES = 20;
const WARMUP_S = 2;
const DRAIN_MS = 10_000;
const QUESTION = 'Is there a scratch on this part?';
const FORMS = ['raw', 'json'] as const;
type Form = (typeof FORMS)[number];

interface Sample { at: number; done?: number; ok?: boolean; code?: string; recorded: boolean }

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

/** A whole JPEG by the bridge's checks (start and end markers), different for every `seq` so no answer is shared. */
function frame(bytes: number, seq: number): Buffer {
  const image = Buffer.alloc(bytes, seq % 251);
  image.set([0xff, 0xd8, 0xff, 0xe0], 0);
  image.writeUInt32BE(seq >>> 0, 4);
  image.set([0xff, 0xd9], bytes - 2);
  return image;
}

/** What the camera publishes for one image in each form: the topic and the payload. */
function message(form: Form, device: string, id: string, image: Buffer): { topic: string; payload: Buffer } {
  if (form === 'raw') return { topic: `devices/${device}/image/normal/shot/${id}`, payload: image };
  const url = `data:image/jpeg;base64,${image.toString('base64')}`;
  const content = [{ type: 'text', text: QUESTION }, { type: 'image_url', image_url: { url, detail: 'low' } }];
  return { topic: `devices/${device}/infer/normal`, payload: Buffer.from(JSON.stringify({ id, messages: [{ role: 'user', content }] })) };
}

async function connect(port: number, id: string, samples: Map<string, Sample>): Promise<MqttClient> {
  const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { clientId: id, protocolVersion: 4, reconnectPeriod: 0 });
  await new Promise<void>((resolve, reject) => {
    c.once('connect', () => resolve());
    c.once('error', reject);
  });
  c.on('message', (_topic, payload) => {
    const reply = JSON.parse(payload.toString()) as { id: string; ok: boolean; error?: { code?: string } };
    const s = samples.get(reply.id);
    if (s === undefined || s.done !== undefined) return;
    s.done = performance.now() - s.at;
    s.ok = reply.ok;
    s.code = reply.error?.code;
  });
  await c.subscribeAsync(`devices/${id}/result`, { qos: 1 });
  return c;
}

/** One form at one rate on a fresh bridge: its figures by row name. */
async function phase(form: Form, upstreamUrl: string, configFile: string, kb: number, rate: number, seconds: number, tag: string): Promise<Record<string, number>> {
  const bytes = kb * 1024;
  const service = await startServiceProcess(
    {
      UPSTREAM_URL: upstreamUrl,
      CONFIG_FILE: configFile,
      // Limits far above the offered rate, no cache, no event-loop guard: every request is measured.
      OVERLOAD_DELAY_MS: '0',
      RATE_LIMIT_RPM: '10000000',
      DEVICE_RATE_LIMIT_RPM: '10000000',
      MAX_CONCURRENCY: '512',
      CACHE_TTL_S: '0',
      MAX_PAYLOAD_BYTES: String(bytes * 2),
      IMAGE_MAX_BYTES: String(bytes * 2),
    },
    process.env.BENCH_BRIDGE ? { script: process.env.BENCH_BRIDGE } : {},
  );
  const samples = new Map<string, Sample>();
  const devices: MqttClient[] = [];
  const build: number[] = [];
  let sentBytes = 0;
  try {
    const ids = Array.from({ length: DEVICES }, (_, i) => `img-${i}`);
    devices.push(...(await Promise.all(ids.map((id) => connect(service.mqttPort, id, samples)))));
    const pid = service.child.pid as number;
    let cpuAt = 0;
    await paced(rate, WARMUP_S, seconds, (i, recorded) => {
      if (recorded && cpuAt === 0) cpuAt = cpuSeconds(pid);
      const device = devices[i % DEVICES] as MqttClient;
      const id = `${tag}-${i}`;
      const image = frame(bytes, i);
      const started = performance.now();
      const { topic, payload } = message(form, device.options.clientId as string, id, image);
      if (recorded) build.push((performance.now() - started) * 1000);
      sentBytes = payload.length;
      samples.set(id, { at: performance.now(), recorded });
      device.publish(topic, payload, { qos: 1 });
    });
    const recorded = [...samples.values()].filter((s) => s.recorded);
    await drain(recorded, DRAIN_MS);
    const cpuUs = ((cpuSeconds(pid) - cpuAt) * 1e6) / recorded.length;
    const ok = recorded.filter((s) => s.ok === true).map((s) => s.done as number);
    const codes = new Map<string, number>();
    for (const s of recorded) if (s.code !== undefined) codes.set(s.code, (codes.get(s.code) ?? 0) + 1);
    if (codes.size > 0) log(`${tag}: error replies by code: ${[...codes].map(([c, n]) => `${c} ${n}`).join(', ')}`);
    return {
      'payload bytes': sentBytes,
      'camera: build the payload, µs': pct(build, 0.5),
      'bridge CPU per request, µs': cpuUs,
      'reply p50': pct(ok, 0.5),
      'reply p99': pct(ok, 0.99),
      'lost (no reply)': recorded.filter((s) => s.done === undefined).length,
      'error replies': recorded.filter((s) => s.ok === false).length,
    };
  } finally {
    for (const d of devices) d.end(true);
    await service.stop('SIGTERM');
  }
}


const COUNTS = new Set(['payload bytes', 'lost (no reply)', 'error replies']);
const formatOf = (row: string): RowFormat => ({ count: COUNTS.has(row) || row.endsWith('µs'), unit: ' ms' });
const column = (form: Form, rate: number): string => `${form} at ${rate}/s`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      kb: { type: 'string', default: '100' },
      rates: { type: 'string', default: '20,100' },
      seconds: { type: 'string', default: '10' },
      runs: { type: 'string', default: '3' },
    },
  });
  const [kb, seconds, runCount] = [Number(values.kb), Number(values.seconds), Number(values.runs)];
  const rates = values.rates.split(',').map(Number);
  if (!(kb >= 1) || rates.some((r) => !(r > 0)) || !(seconds > 0) || !(Number.isInteger(runCount) && runCount > 0)) {
    throw new Error('--kb, --rates, --seconds and --runs must be positive');
  }
  const dir = mkdtempSync(join(tmpdir(), 'eab-bench-images-'));
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ templates: { shot: { messages: [{ role: 'user', content: QUESTION }] } } }));
  const sim = await startUpstream();
  const runs: Array<Map<string, Record<string, number>>> = [];
  try {
    for (let run = 0; run < runCount; run += 1) {
      const out = new Map<string, Record<string, number>>();
      for (const rate of rates) {
        for (const form of FORMS) {
          const f = await phase(form, sim.url, configFile, kb, rate, seconds, `r${run}-${form}-${rate}`);
          log(`run ${run + 1}, ${form} at ${rate}/s: ${Object.entries(f).map(([k, v]) => `${k} ${Math.round(v * 10) / 10}`).join(', ')}`);
          out.set(column(form, rate), f);
        }
      }
      runs.push(out);
    }
  } finally {
    sim.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`A ${kb} KiB JPEG per request from ${DEVICES} MQTT 3.1.1 cameras at QoS 1, ${seconds} s per phase after ${WARMUP_S} s unrecorded; upstream simulator 20 ms.\n`);
  console.log(runsTable(rates.flatMap((r) => FORMS.map((f) => column(f, r))), runs, formatOf));
}

await main();
