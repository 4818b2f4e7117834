// `npm run bench:store`'s command line, and the fixed settings every scenario shares.
import { parseArgs } from 'node:util';
import type { AdmitLimits } from '../../bridge/store/port.js';

/** The sizes of one run; a two-process scenario hands them to its children on their command line. */
export interface Sizes {
  jobs: number;
  devices: number;
  claimMax: number;
  inflight: number;
  redisUrl: string;
}

export interface StoreBenchOptions extends Sizes {
  json: boolean;
  help: boolean;
  scenarios: string | undefined;
  /** Set in a child process serving as one instance of a two-instance scenario. */
  worker: string | undefined;
}

export const WARMUP_JOBS = 1000;
/** Large enough never to throttle: the benchmark measures the store, not the limits. */
export const LIMITS: AdmitLimits = { deviceRpm: 1_000_000_000, queueMax: 1_000_000_000 };
export const LEASE_MS = 120_000;
export const RATE = { rpm: 1_000_000_000, tpm: 1_000_000_000_000 };
export const DONE = { ttlS: 86_400, deadLetter: false };

const positiveInt = (name: string, raw: string | undefined): number => {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    console.error(`--${name} must be a positive integer (got ${String(raw)})`);
    process.exit(2);
  }
  return n;
};

export function readOptions(): StoreBenchOptions {
  const { values } = parseArgs({
    options: {
      jobs: { type: 'string', default: '20000' },
      devices: { type: 'string', default: '1000' },
      'claim-max': { type: 'string', default: '64' },
      inflight: { type: 'string', default: '256' },
      scenarios: { type: 'string' },
      redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
      worker: { type: 'string' },
    },
  });
  return {
    jobs: positiveInt('jobs', values.jobs),
    devices: positiveInt('devices', values.devices),
    claimMax: positiveInt('claim-max', values['claim-max']),
    inflight: positiveInt('inflight', values.inflight),
    redisUrl: values.redis ?? 'redis://127.0.0.1:6379',
    json: values.json,
    help: values.help,
    scenarios: values.scenarios,
    worker: values.worker,
  };
}

/** The options a child process needs to run the same sizes against the same Redis. */
export function sizeArgs(sizes: Sizes): string[] {
  return [
    '--jobs',
    String(sizes.jobs),
    '--devices',
    String(sizes.devices),
    '--claim-max',
    String(sizes.claimMax),
    '--inflight',
    String(sizes.inflight),
    '--redis',
    sizes.redisUrl,
  ];
}

/** FAIR_SHARE=false measures the stores without fair share, as the bridge runs with it. */
export const FAIR_SHARE = process.env.FAIR_SHARE !== 'false';
