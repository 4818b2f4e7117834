// npm run fuzz -- --minutes N [--seed S] [--attackers 4] [--redis URL] [--json]
// Hostile input from anonymous devices against a real bridge while an innocent device is
// timed; prints the oracles (docs/fuzzing.md) and exits 1 when one fails, with the seed.
import { KINDS } from './inputs/actions.js';
import { iterationTable, oracleTable } from './oracles.js';
import { parseFuzzArgs, UsageHelp, USAGE, type FuzzOptions } from './options.js';
import { runFuzz, type FuzzReport } from './run.js';

/** The command that runs the same inputs again. */
function replay(o: FuzzOptions): string {
  const drain = o.drainS === undefined ? '' : ` --drain ${o.drainS}`;
  const kinds = o.kinds.length === KINDS.length ? '' : ` --kinds ${o.kinds.join(',')}`;
  return `npm run fuzz -- --seed ${o.seed} --minutes ${o.minutes} --attackers ${o.attackers} --rate ${o.rate} --ttl ${o.ttlS}${drain}${kinds}`;
}

function text(report: FuzzReport): string {
  const lat = report.latency;
  const kib = (b: number): string => `${Math.round(b / 1024)} KiB`;
  const families = (f: Record<string, number>): string =>
    Object.entries(f)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none';
  const iterations = Object.values(report.iterations).reduce((sum, s) => sum + s.iterations, 0);
  return [
    `seed ${report.seed}; ${report.options.attackers} attackers at ${report.options.rate}/s; ${iterations} iterations`,
    `innocent: baseline p50 ${lat.baseline.p50} ms p99 ${lat.baseline.p99} ms (${lat.baseline.requests}); attack p50 ${lat.attack.p50} ms p99 ${lat.attack.p99} ms (${lat.attack.requests}); drain p50 ${lat.drain.p50} ms p99 ${lat.drain.p99} ms (${lat.drain.requests})`,
    `Redis: before ${report.redis.before.keys} keys ${kib(report.redis.before.bytes)}; during at most ${report.redis.maxDuring.keys} keys ${kib(report.redis.maxDuring.bytes)}; after ${report.redis.after.keys} keys ${kib(report.redis.after.bytes)} (used_memory ${kib(report.redis.before.usedMemory)} → ${kib(report.redis.after.usedMemory)})`,
    `  keys before: ${families(report.redis.before.families)}`,
    `  keys after:  ${families(report.redis.after.families)}`,
    `upstream gateway refusals: ${JSON.stringify(report.gatewayRefusals)}; bridge log lines ${report.bridgeLogLines}; bridge event-loop delay p99 at most ${Math.round(report.maxLoopDelayP99Ms)} ms`,
    `attackers' replies by code: ${JSON.stringify(report.attackerReplies)}; second replies to an innocent request: ${report.innocentRepeatedReplies}`,
    `bridge warnings and errors: ${
      Object.entries(report.bridgeWarnings)
        .sort((a, b) => b[1] - a[1])
        .map(([m, n]) => `${m} ×${n}`)
        .join('; ') || 'none'
    }`,
    '',
    iterationTable(report.iterations, report.kinds),
    '',
    oracleTable(report.oracles),
    '',
    report.passed ? 'all oracles hold' : `ORACLE FAILED: replay with ${replay(report.options)}`,
  ].join('\n');
}

async function main(): Promise<number> {
  let options: FuzzOptions;
  try {
    options = parseFuzzArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageHelp) {
      console.log(USAGE);
      return 0;
    }
    console.error(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
    return 2;
  }
  const report = await runFuzz(options);
  console.log(options.json ? JSON.stringify(report, null, 2) : text(report));
  if (!report.passed) process.stderr.write(`fuzz: an oracle failed; replay with ${replay(options)}\n`);
  return report.passed ? 0 : 1;
}

process.exitCode = await main();
