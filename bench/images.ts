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
import { startUpstream } from './e2e/upstream.js';
import { alternatingRuns, MEASURED_ENV, outcomeFigures, runPhase, WARMUP_SECONDS } from './paced-phase.js';
import { pct, runsTable, type RowFormat } from './runs-table.js';

const DEVICES = 20;
const QUESTION = 'Is there a scratch on this part?';
const FORMS = ['raw', 'json'] as const;
type Form = (typeof FORMS)[number];

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
  const content = [
    { type: 'text', text: QUESTION },
    { type: 'image_url', image_url: { url, detail: 'low' } },
  ];
  return { topic: `devices/${device}/infer/normal`, payload: Buffer.from(JSON.stringify({ id, messages: [{ role: 'user', content }] })) };
}

/** One form at one rate on a fresh bridge: its figures by row name. */
async function phase(
  form: Form,
  upstreamUrl: string,
  configFile: string,
  kb: number,
  rate: number,
  seconds: number,
  tag: string,
): Promise<Record<string, number>> {
  const bytes = kb * 1024;
  const env = {
    UPSTREAM_URL: upstreamUrl,
    CONFIG_FILE: configFile,
    ...MEASURED_ENV,
    MAX_PAYLOAD_BYTES: String(bytes * 2),
    IMAGE_MAX_BYTES: String(bytes * 2),
  };
  const build: number[] = [];
  let sentBytes = 0;
  const deviceIds = Array.from({ length: DEVICES }, (_, i) => `img-${i}`);
  const result = await runPhase({
    env,
    deviceIds,
    rate,
    seconds,
    tag,
    message: (i, device, id, recorded) => {
      const image = frame(bytes, i);
      const started = performance.now();
      const built = message(form, device, id, image);
      if (recorded) build.push((performance.now() - started) * 1000);
      sentBytes = built.payload.length;
      return built;
    },
  });
  return { 'payload bytes': sentBytes, 'camera: build the payload, µs': pct(build, 0.5), ...outcomeFigures(result, tag) };
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
  const phases = rates.flatMap((rate) => FORMS.map((form) => ({ rate, form, name: column(form, rate) })));
  let runs: Array<Map<string, Record<string, number>>>;
  try {
    runs = await alternatingRuns(
      runCount,
      phases.map((p) => p.name),
      (name, run) => {
        const { form, rate } = phases.find((p) => p.name === name) as (typeof phases)[number];
        return phase(form, sim.url, configFile, kb, rate, seconds, `r${run}-${form}-${rate}`);
      },
    );
  } finally {
    sim.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `A ${kb} KiB JPEG per request from ${DEVICES} MQTT 3.1.1 cameras at QoS 1, ${seconds} s per phase after ${WARMUP_SECONDS} s unrecorded; upstream simulator 20 ms.\n`,
  );
  console.log(
    runsTable(
      rates.flatMap((r) => FORMS.map((f) => column(f, r))),
      runs,
      formatOf,
    ),
  );
}

await main();
