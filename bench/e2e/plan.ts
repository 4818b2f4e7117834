// What one `npm run bench` does and how long: the fixed workload, the step search's ladder and
// timings (full and --quick), and the pass criteria every system is held to.

/** The upstream simulator's fixed answer time: every bridge figure is read against it. */
export const UPSTREAM_LATENCY_MS = 20;
export const P99_LIMIT_MS = 250;
/** Priorities interleaved in this proportion, as a plant's mixed stream. */
export const MIX = { critical: 1, high: 9, normal: 80, low: 10 };

/** The probe after the overload step waits this long for its replies. */
export const PROBE_WAIT_MS = 2000;
/** The overload step waits this long for its last terminal replies: all must come. */
export const OVERLOAD_WAIT_MS = 30_000;
/** The overload step's requests carry this ttl_ms unless `--overload-ttl-ms` says otherwise (0: none). */
export const OVERLOAD_TTL_MS = 2000;
/**
 * The bridges' OVERLOAD_QUEUE_WAIT_MS in the step search and the first overload step; the
 * second overload step runs a fresh bridge with the default (0, the guard off).
 */
export const BENCH_QUEUE_WAIT_MS = 1000;
/** Bisected rates are rounded to a multiple of this, so rates stay readable and comparable across runs. */
export const RATE_ROUNDING = 125;

export interface Plan {
  quick: boolean;
  /** Seconds at 1 000 and at 2 000 req/s before the first step, not recorded. */
  warmUpS: [number, number];
  /** After a failed step: the longest wait for the replies it still owes (given up after
   * drainStallMs without one: replies owed by dropped connections never come), then a pause. */
  drainMs: number;
  drainStallMs: number;
  settleMs: number;
  /** Replies later than this after a step's last send count as lost (a passing step's p99 is far below it anyway). */
  waitMs: number;
  /** Measured seconds per step, after `leadS` seconds at the same rate that are not recorded. */
  stepS: number;
  leadS: number;
  /** Rates tried in turn until one fails; then the gap is bisected. */
  ladder: number[];
  bisections: number;
  overloadS: number;
  /** The ttl_ms every request of the overload step carries; 0 = none. */
  overloadTtlMs: number;
  /** `--overload-rate`: no step search, only the warm-up and the overload step at this rate. */
  overloadRate?: number;
  /** Fixed rates given with --rates: every rate is run, none is searched, no overload step. */
  fixed: boolean;
  /** Idle devices for the idle-connections measurement; 0 skips it. */
  idle: number;
}

export type Timings = Omit<Plan, 'idle' | 'fixed' | 'overloadTtlMs' | 'overloadRate'>;

export const FULL: Timings = {
  quick: false,
  warmUpS: [2, 3],
  drainMs: 20_000,
  drainStallMs: 2000,
  settleMs: 1000,
  waitMs: 2000,
  stepS: 3,
  leadS: 1,
  ladder: [1000, 2000, 4000, 8000, 16000, 24000, 32000, 48000],
  bisections: 2,
  overloadS: 10,
};

export const QUICK: Timings = {
  quick: true,
  warmUpS: [0.5, 0.5],
  drainMs: 3000,
  drainStallMs: 500,
  settleMs: 200,
  waitMs: 1000,
  stepS: 1,
  leadS: 0.2,
  ladder: [1000, 4000, 16000, 32000],
  bisections: 1,
  overloadS: 1.5,
};

/** Idle measurement: seconds of light load beside the idle devices, and the longest wait for settled RSS. */
export function idleTimings(plan: Plan): { lightLoadS: number; settleS: number } {
  return plan.quick ? { lightLoadS: 1, settleS: 5 } : { lightLoadS: 5, settleS: 45 };
}
