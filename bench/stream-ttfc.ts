// Time to first streamed chunk: what the bridge adds to the upstream's own first-token time.
// Per rate and back to back in one run (the machine is shared, so both sides see the same
// load): an undici client streams chat calls straight to the upstream simulator (TTFT: send
// to the first event with text), then 100 MQTT devices send `"stream": true` requests through
// a fresh bridge (TTFC: publish to chunk seq 0 on devices/{id}/stream; and publish to reply).
// Each phase sends 3 s unrecorded first: a fresh bridge needs about 2 s at 1 000/s to settle.
// Prints the median and spread over the runs as Markdown on stdout, progress on stderr.
//
//   node dist/bench/stream-ttfc.js [--rates 100,1000] [--seconds 10] [--runs 3]
//   extra bridge variables: BENCH_ENV='{"STREAM_FLUSH_MS":"0"}'
//   another build of the bridge: BENCH_BRIDGE=/path/to/dist/bridge/main.js
import { parseArgs } from 'node:util';
import mqtt, { type MqttClient } from 'mqtt';
import { Pool } from 'undici';
import { startServiceProcess } from '../device-sim/service-process.js';
import { startUpstream } from './e2e/upstream.js';
import { drain, paced } from './pacing.js';
import { MEASURED_ENV } from './paced-phase.js';
import { pct, runsTable, type RowFormat } from './runs-table.js';

const LATENCY_MS = 20;
const CHUNK_MS = 10;
const DEVICES = 100;
const WARMUP_S = 3;
const DRAIN_MS = 5000;

/** One phase's figures over the recorded requests: first text and ok end, in ms; counts. */
interface Phase {
  first: number[];
  done: number[];
  rate: number; // answered ok per second of sending (first to last recorded send)
  lost: number;
  errors: number;
  codes: string; // error replies by code, for the progress line
  warmup: string; // what the unrecorded seconds lost or had refused, likewise
  noChunk: number;
}

interface Sample {
  at: number;
  first?: number;
  done?: number;
  ok?: boolean;
  code?: string;
  chunked: boolean;
  recorded: boolean;
}

const log = (msg: string): void => void process.stderr.write(`${msg}\n`);

function summarize(samples: Sample[]): Phase {
  const rec = samples.filter((s) => s.recorded);
  const answered = rec.filter((s) => s.done !== undefined);
  const ok = answered.filter((s) => s.ok === true);
  const span = (rec[rec.length - 1]?.at ?? 0) - (rec[0]?.at ?? 0);
  return {
    first: rec.flatMap((s) => (s.first === undefined ? [] : [s.first])),
    done: ok.map((s) => s.done as number),
    rate: span > 0 ? ok.length / (span / 1000) : 0,
    lost: rec.length - answered.length,
    errors: answered.filter((s) => s.ok === false).length,
    codes: countCodes(rec),
    warmup: warmupNote(samples.filter((s) => !s.recorded)),
    noChunk: ok.filter((s) => !s.chunked).length,
  };
}

function countCodes(samples: Sample[]): string {
  const n = new Map<string, number>();
  for (const s of samples) if (s.code !== undefined) n.set(s.code, (n.get(s.code) ?? 0) + 1);
  return [...n].map(([code, count]) => ` ${code} ${count}`).join(',');
}

function warmupNote(warm: Sample[]): string {
  return `warm-up: lost ${warm.filter((s) => s.done === undefined).length}, errors${countCodes(warm) || ' 0'}`;
}

/** True once `sse` holds a complete event whose first choice carries non-empty text. */
function hasText(sse: string): boolean {
  for (const event of sse.split('\n\n').slice(0, -1)) {
    if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
    const body = JSON.parse(event.slice(6)) as { choices?: Array<{ delta?: { content?: unknown } }> };
    const text = body.choices?.[0]?.delta?.content;
    if (typeof text === 'string' && text !== '') return true;
  }
  return false;
}

async function streamCall(pool: Pool, path: string, question: string, s: Sample): Promise<void> {
  const messages = [{ role: 'user', content: question }];
  const body = JSON.stringify({ model: 'gpt-4o-mini', messages, stream: true, stream_options: { include_usage: true } });
  try {
    const res = await pool.request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body });
    let sse = '';
    for await (const piece of res.body) {
      if (s.first !== undefined) continue; // read the rest of the stream, no need to scan it
      sse += (piece as Buffer).toString();
      if (hasText(sse)) s.first = performance.now() - s.at;
    }
    s.done = performance.now() - s.at;
    s.ok = res.statusCode === 200 && s.first !== undefined;
    s.chunked = s.first !== undefined;
  } catch {
    s.done = performance.now() - s.at;
    s.ok = false;
  }
}

async function upstreamAlone(url: string, rate: number, seconds: number, tag: string): Promise<Phase> {
  const base = new URL(url);
  const pool = new Pool(base.origin, { connections: 1024 });
  const samples: Sample[] = [];
  try {
    await paced(rate, WARMUP_S, seconds, (i, recorded) => {
      const s: Sample = { at: performance.now(), chunked: false, recorded };
      samples.push(s);
      void streamCall(pool, `${base.pathname}/chat/completions`, `ttfc question ${tag}-${i}`, s);
    });
    await drain(samples, DRAIN_MS);
    return summarize(samples);
  } finally {
    await pool.destroy();
  }
}

async function connectDevice(port: number, id: string, onMessage: (topic: string, payload: Buffer) => void): Promise<MqttClient> {
  const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { clientId: id, protocolVersion: 4, reconnectPeriod: 0 });
  await new Promise<void>((resolve, reject) => {
    c.once('connect', () => resolve());
    c.once('error', reject);
  });
  c.on('message', onMessage);
  await c.subscribeAsync(`devices/${id}/stream`, { qos: 0 });
  await c.subscribeAsync(`devices/${id}/result`, { qos: 1 });
  return c;
}

/** Records a stream chunk or a reply against its request. */
function onMessage(samples: Map<string, Sample>, topic: string, payload: Buffer): void {
  const now = performance.now();
  const msg = JSON.parse(payload.toString()) as { id: string; seq?: number; delta?: unknown; ok?: boolean; error?: { code?: string } };
  const s = samples.get(msg.id);
  if (s === undefined) return;
  if (topic.endsWith('/stream')) {
    if (typeof msg.delta !== 'string') return;
    s.chunked = true;
    if (msg.seq === 0) s.first = now - s.at;
  } else if (s.done === undefined) {
    s.done = now - s.at;
    s.ok = msg.ok === true;
    s.code = msg.error?.code;
  }
}

async function throughBridge(url: string, rate: number, seconds: number, tag: string): Promise<Phase> {
  const env = JSON.parse(process.env.BENCH_ENV ?? '{}') as Record<string, string>;
  const service = await startServiceProcess(
    {
      UPSTREAM_URL: url,
      // Every request measured (BENCH_ENV can set the limits back).
      ...MEASURED_ENV,
      QUEUE_MAX: '1000000',
      ...env,
    },
    process.env.BENCH_BRIDGE ? { script: process.env.BENCH_BRIDGE } : {},
  );
  const byId = new Map<string, Sample>();
  const devices: MqttClient[] = [];
  try {
    const ids = Array.from({ length: DEVICES }, (_, i) => `ttfc-${i}`);
    const handler = (topic: string, payload: Buffer): void => onMessage(byId, topic, payload);
    devices.push(...(await Promise.all(ids.map((id) => connectDevice(service.mqttPort, id, handler)))));
    await paced(rate, WARMUP_S, seconds, (i, recorded) => {
      const device = devices[i % DEVICES] as MqttClient;
      const id = `${tag}-${i}`;
      const body = JSON.stringify({ id, messages: [{ role: 'user', content: `ttfc question ${id}` }], stream: true });
      byId.set(id, { at: performance.now(), chunked: false, recorded });
      device.publish(`devices/${device.options.clientId}/infer/normal`, body, { qos: 1 });
    });
    const samples = [...byId.values()];
    await drain(samples, DRAIN_MS);
    return summarize(samples);
  } finally {
    for (const d of devices) d.end(true);
    await service.stop('SIGTERM');
  }
}

/** One run's figures at one rate, by row name. */
function figures(up: Phase, br: Phase): Record<string, number> {
  const [ttft50, ttft99, ttfc50, ttfc99] = [pct(up.first, 0.5), pct(up.first, 0.99), pct(br.first, 0.5), pct(br.first, 0.99)];
  return {
    'upstream TTFT p50': ttft50,
    'upstream TTFT p99': ttft99,
    'device TTFC p50': ttfc50,
    'device TTFC p99': ttfc99,
    'overhead p50': ttfc50 - ttft50,
    'overhead p99': ttfc99 - ttft99,
    'reply p50': pct(br.done, 0.5),
    'reply p99': pct(br.done, 0.99),
    'streams/s, upstream alone': up.rate,
    'streams/s, through the bridge': br.rate,
    'lost (no reply)': br.lost,
    'error replies': br.errors,
    'no chunk': br.noChunk,
    'upstream-alone calls failed': up.lost + up.errors,
  };
}

const COUNTS = new Set(['lost (no reply)', 'error replies', 'no chunk', 'upstream-alone calls failed']);
const formatOf = (row: string): RowFormat => ({ count: row.startsWith('streams') || COUNTS.has(row), unit: ' ms' });
const column = (rate: number): string => `${rate} streams/s`;

async function runOnce(run: number, rates: number[], seconds: number): Promise<Map<string, Record<string, number>>> {
  const sim = await startUpstream(LATENCY_MS, ['--stream-chunk-ms', String(CHUNK_MS)]);
  const out = new Map<string, Record<string, number>>();
  try {
    for (const rate of rates) {
      const up = await upstreamAlone(sim.url, rate, seconds, `u${run}-${rate}`);
      log(
        `run ${run + 1}, ${rate}/s upstream alone: TTFT p50 ${pct(up.first, 0.5).toFixed(1)} p99 ${pct(up.first, 0.99).toFixed(1)} ms, ${up.rate.toFixed(0)}/s, lost ${up.lost}`,
      );
      const br = await throughBridge(sim.url, rate, seconds, `b${run}-${rate}`);
      log(
        `run ${run + 1}, ${rate}/s bridge: TTFC p50 ${pct(br.first, 0.5).toFixed(1)} p99 ${pct(br.first, 0.99).toFixed(1)} ms, reply p99 ${pct(br.done, 0.99).toFixed(1)} ms, ${br.rate.toFixed(0)}/s, lost ${br.lost}, errors ${br.errors}${br.codes}, no chunk ${br.noChunk} (${br.warmup})`,
      );
      out.set(column(rate), figures(up, br));
    }
    return out;
  } finally {
    sim.child.kill('SIGTERM');
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { rates: { type: 'string', default: '100,1000' }, seconds: { type: 'string', default: '10' }, runs: { type: 'string', default: '3' } },
  });
  const rates = values.rates.split(',').map(Number);
  const seconds = Number(values.seconds);
  const runCount = Number(values.runs);
  if (rates.some((r) => !(r > 0)) || !(seconds > 0) || !(Number.isInteger(runCount) && runCount > 0))
    throw new Error('--rates, --seconds and --runs must be positive');
  const runs: Array<Map<string, Record<string, number>>> = [];
  for (let run = 0; run < runCount; run += 1) runs.push(await runOnce(run, rates, seconds));
  console.log(
    `Upstream simulator: first byte after ${LATENCY_MS} ms, one event every ${CHUNK_MS} ms; ${DEVICES} devices, QoS 1 requests, ${seconds} s per rate after ${WARMUP_S} s unrecorded.\n`,
  );
  console.log(runsTable(rates.map(column), runs, formatOf));
}

await main();
