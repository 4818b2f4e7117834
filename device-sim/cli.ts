#!/usr/bin/env node
// device-sim: runs a fleet against a broker and prints the result table (or JSON).
// Exit codes: 0 nothing lost, 1 something lost or the run failed, 2 bad command line.
import { parseFleetArgs, runFleet, UsageError, type FleetArgs } from './fleet.js';
import { formatTable } from './stats.js';

const USAGE = `usage: device-sim --url mqtt://127.0.0.1:1883 --devices 100 --rate 500 --duration 30
  --mix critical=1,high=9,normal=80,low=10 --qos 1 [--username u --password p]
  [--reply-timeout 60] [--prefix sim] [--connect-concurrency 50] [--seed n] [--questions n] [--json]`;

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let args: FleetArgs;
  try {
    args = parseFleetArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`device-sim: ${err.message}\n`);
    return 2;
  }
  // stdout carries only the result, so --json output stays machine-readable.
  const report = await runFleet({ ...args, onProgress: (line) => process.stderr.write(`device-sim: ${line}\n`) });
  process.stdout.write(args.json ? `${JSON.stringify(report)}\n` : `${formatTable(report)}\n`);
  return report.overall.lost === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`device-sim: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
