#!/usr/bin/env node
// upstream-sim: serves the simulator until SIGINT/SIGTERM. Exit 2 on a bad option value.
import { parseArgs } from 'node:util';
import { checkUpstreamSimOptions, startUpstreamSim, type UpstreamSimOptions } from './sim.js';
import { UsageError } from '../contract/index.js';

const USAGE = `usage: upstream-sim --port 8080 --latency-ms 50 [--jitter-ms 10] [--error-rate 0.05]
  [--rate-limit-rpm 600] [--hang-rate 0] [--revoked-keys k1,k2] [--host 127.0.0.1]
  [--refused-models key=model,*=model]  403 for a model a key (* any) may not use
  [--answer-bytes 0]  pad every chat answer's content to this many bytes
  [--stream-chunk-ms 10]  pace of a streaming answer ("stream": true): one chunk every this many ms`;

// CLI flag names, so messages name what the user typed rather than the option property.
const FLAGS = {
  port: 'port',
  latencyMs: 'latency-ms',
  jitterMs: 'jitter-ms',
  errorRate: 'error-rate',
  rateLimitRpm: 'rate-limit-rpm',
  hangRate: 'hang-rate',
  revokedKeys: 'revoked-keys',
  refusedModels: 'refused-models',
  host: 'host',
  answerBytes: 'answer-bytes',
  streamChunkMs: 'stream-chunk-ms',
} as const satisfies Record<keyof UpstreamSimOptions, string>;

function parse(argv: string[]): UpstreamSimOptions {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: Object.fromEntries(Object.values(FLAGS).map((f) => [f, { type: 'string' as const }])),
    }));
  } catch (err) {
    // node's messages span several lines; the contract wants one.
    throw new UsageError((err instanceof Error ? err.message : String(err)).replace(/\s*\n\s*/g, ' '));
  }
  const num = (flag: string): number | undefined => {
    const raw = values[flag];
    if (typeof raw !== 'string') return undefined;
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${flag}: not a number: "${raw}"`);
    return n;
  };
  const opts: UpstreamSimOptions = { port: num(FLAGS.port) ?? 8080 };
  const host = values[FLAGS.host];
  if (typeof host === 'string') opts.host = host;
  const latencyMs = num(FLAGS.latencyMs);
  const jitterMs = num(FLAGS.jitterMs);
  const errorRate = num(FLAGS.errorRate);
  const rateLimitRpm = num(FLAGS.rateLimitRpm);
  const hangRate = num(FLAGS.hangRate);
  const answerBytes = num(FLAGS.answerBytes);
  const streamChunkMs = num(FLAGS.streamChunkMs);
  if (latencyMs !== undefined) opts.latencyMs = latencyMs;
  if (jitterMs !== undefined) opts.jitterMs = jitterMs;
  if (errorRate !== undefined) opts.errorRate = errorRate;
  if (rateLimitRpm !== undefined) opts.rateLimitRpm = rateLimitRpm;
  if (hangRate !== undefined) opts.hangRate = hangRate;
  if (answerBytes !== undefined) opts.answerBytes = answerBytes;
  if (streamChunkMs !== undefined) opts.streamChunkMs = streamChunkMs;
  const revoked = values[FLAGS.revokedKeys];
  if (typeof revoked === 'string')
    opts.revokedKeys = revoked
      .split(',')
      .map((k) => k.trim())
      .filter(Boolean);
  const refused = values[FLAGS.refusedModels];
  if (typeof refused === 'string')
    opts.refusedModels = refused
      .split(',')
      .filter((p) => p.trim() !== '')
      .map(refusal);
  const problem = checkUpstreamSimOptions(opts);
  if (problem !== null) {
    // Messages start with the property name; swap it for the flag the user typed.
    const key = (Object.keys(FLAGS) as (keyof typeof FLAGS)[]).find((k) => problem.startsWith(`${k} `));
    throw new UsageError(key === undefined ? problem : `--${FLAGS[key]}:${problem.slice(key.length)}`);
  }
  return opts;
}

/** `key=model` (the model may contain `=`, the key may not). */
function refusal(pair: string): { key: string; model: string } {
  const at = pair.indexOf('=');
  if (at <= 0 || at === pair.length - 1) throw new UsageError(`--refused-models: expected key=model, got "${pair.trim()}"`);
  return { key: pair.slice(0, at).trim(), model: pair.slice(at + 1).trim() };
}

async function main(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  let opts: UpstreamSimOptions;
  try {
    opts = parse(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`upstream-sim: ${err.message}\n`);
    process.exitCode = 2;
    return;
  }
  const sim = await startUpstreamSim(opts);
  process.stdout.write(`upstream-sim listening on ${sim.url}\n`);
  const stop = (): void => {
    sim.close().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`upstream-sim: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
