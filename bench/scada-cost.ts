// What typed answers and the SCADA outputs cost the bridge: CPU per template request with
// each step turned on in turn, on a fresh bridge each, one after the other in one run so all
// see the same machine. `prose`: a template without `output` (the baseline); `typed`: the same
// template with an output schema (the answer parsed and validated); `+uns`: published to the
// plant's namespace too; `+sparkplug`: and as Sparkplug B tags. Prints the median and spread
// over the runs as Markdown on stdout, progress on stderr.
//
//   node dist/bench/scada-cost.js [--rate 200] [--seconds 10] [--runs 3]
//   another build of the bridge: BENCH_BRIDGE=/path/to/dist/bridge/main.js
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startUpstream } from './e2e/upstream.js';
import { alternatingRuns, MEASURED_ENV, outcomeFigures, runPhase, WARMUP_SECONDS } from './paced-phase.js';
import { runsTable, type RowFormat } from './runs-table.js';

const DEVICES = 20;
const STEPS = ['prose', 'typed', '+uns', '+sparkplug'] as const;
type Step = (typeof STEPS)[number];

const OUTPUT = {
  type: 'object',
  properties: {
    reject: { type: 'boolean', description: 'whether the part is rejected' },
    burr_mm: { type: 'number', minimum: 0, maximum: 5 },
    defect: { type: 'string', enum: ['none', 'burr', 'crack', 'dent'] },
    note: { type: 'string', maxLength: 80 },
  },
  required: ['reject', 'burr_mm', 'defect', 'note'],
};
const MESSAGES = [{ role: 'user', content: 'Inspect part {{part}}: is it rejected, and why?' }];

/** The CONFIG_FILE and environment of one step. */
function setup(step: Step, dir: string): { env: Record<string, string>; configFile: string } {
  const typed = step !== 'prose';
  const file: Record<string, unknown> = { templates: { inspect: { messages: MESSAGES, ...(typed ? { output: OUTPUT } : {}) } } };
  if (step === '+uns' || step === '+sparkplug') file['uns'] = { root: 'acme/plant-1', devices: { 'press-*': 'stamping/line-3' } };
  const configFile = join(dir, `${step.replace('+', '')}.json`);
  writeFileSync(configFile, JSON.stringify(file));
  return { configFile, env: step === '+sparkplug' ? { SPARKPLUG_GROUP_ID: 'bench', SPARKPLUG_EDGE_NODE_ID: 'bridge' } : {} };
}

/** One step at `rate` on a fresh bridge: its figures by row name. */
async function phase(step: Step, upstreamUrl: string, dir: string, rate: number, seconds: number, tag: string): Promise<Record<string, number>> {
  const { env, configFile } = setup(step, dir);
  const result = await runPhase({
    env: {
      UPSTREAM_URL: upstreamUrl,
      CONFIG_FILE: configFile,
      ...MEASURED_ENV,
      ...env,
    },
    deviceIds: Array.from({ length: DEVICES }, (_, i) => `press-${i}`),
    rate,
    seconds,
    tag,
    message: (i, device, id) => ({ topic: `devices/${device}/infer/normal`, payload: JSON.stringify({ id, template: 'inspect', vars: { part: `A${i}` } }) }),
  });
  return { ...outcomeFigures(result, tag), 'replies with data': result.recorded.filter((s) => s.data === true).length };
}

const COUNTS = new Set(['replies with data', 'lost (no reply)', 'error replies']);
const formatOf = (row: string): RowFormat => ({ count: COUNTS.has(row) || row.endsWith('µs'), unit: ' ms' });

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '200' },
      seconds: { type: 'string', default: '10' },
      runs: { type: 'string', default: '3' },
    },
  });
  const [rate, seconds, runCount] = [Number(values.rate), Number(values.seconds), Number(values.runs)];
  if (!(rate > 0) || !(seconds > 0) || !(Number.isInteger(runCount) && runCount > 0)) throw new Error('--rate, --seconds and --runs must be positive');
  const dir = mkdtempSync(join(tmpdir(), 'eab-bench-scada-'));
  const sim = await startUpstream();
  let runs: Array<Map<string, Record<string, number>>>;
  try {
    runs = await alternatingRuns(runCount, [...STEPS], (step, run) => phase(step as Step, sim.url, dir, rate, seconds, `r${run}-${step.replace('+', '')}`));
  } finally {
    sim.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `A template request (4-field output) from ${DEVICES} MQTT 3.1.1 devices at ${rate}/s, QoS 1, ${seconds} s per step after ${WARMUP_SECONDS} s unrecorded; upstream simulator 20 ms; embedded broker, no Redis.\n`,
  );
  console.log(runsTable([...STEPS], runs, formatOf));
}

await main();
