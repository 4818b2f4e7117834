// Messages between the load coordinator (load.ts) and its worker threads (load-worker.ts).
import type { Priority } from '../contract/index.js';
import type { ReplyCounts } from './stats.js';

export interface WorkerInit {
  host: string;
  /** Each device's id, broker port and login. */
  devices: Array<{ id: string; port: number; username?: string; password?: string }>;
  /** Request ids are `${tag}${seq in base 36}`; unique per worker and run. */
  tag: string;
  mix: Record<Priority, number>;
  /** The worker's first device also subscribes to bridge/+/status (the first worker's only). */
  watchStatus: boolean;
}

export interface StepCommand {
  /** This worker's share of the rate, requests per second. */
  rate: number;
  durationMs: number;
  /**
   * The first part of the step, whose latencies are not recorded: a system needs a moment to
   * settle at a new rate (JIT, heap growth), and the figures are about the rate it sustains.
   */
  leadMs: number;
  /** After sending, how long to wait for the last replies; unanswered after it = lost. */
  waitMs: number;
  /** Every request of the step carries this `ttl_ms`; replies are then told late or not (stats.ts isLate). */
  ttlMs?: number;
}

export type WorkerMessage =
  | { type: 'connect' }
  | { type: 'step'; step: StepCommand }
  /** Wait until every request sent so far is answered, maxMs passed, or replies stopped coming. */
  | { type: 'drain'; maxMs: number; stallMs: number }
  | { type: 'close' };

export interface StepReport extends ReplyCounts {
  sendMs: number;
  duplicates: number;
  /** Connections the broker dropped so far (this worker, the whole run), and the first reason. */
  disconnects: number;
  firstDisconnect?: string;
  /** Most requests the worker was ever behind its schedule. */
  maxBehind: number;
  /** Per priority (PRIORITIES order): latency in µs, HDR histogram compressed to base64. */
  histograms: string[];
  /** Per priority (PRIORITIES order): `expired` replies, and replies later than the step's ttl_ms + 100 ms. */
  expired: number[];
  late: number[];
  /** Per priority (PRIORITIES order): what the step's requests came to. */
  byPriority: ReplyCounts[];
  /** Bridges whose status the watching device read (instance → state), and whether it was refused. */
  bridges: Record<string, string>;
  statusRefused: boolean;
}

export type WorkerReply =
  | { type: 'connected'; devices: number }
  | { type: 'step'; report: StepReport }
  | { type: 'progress'; sent: number; ok: number; errors: Record<string, number> }
  | { type: 'drained'; pending: number }
  | { type: 'closed' }
  | { type: 'error'; message: string };
