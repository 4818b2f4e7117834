// The benchmark's result document (bench/results/latest.json): what the runner measures and
// what the report and the chart are drawn from.

import type { Priority } from '../contract/index.js';
import type { LatencySummary, ReplyCounts } from '../device-sim/stats.js';

/** Latency as devices saw it, publish to reply, in milliseconds. */
export type Latency = LatencySummary;

/** CPU used during a step, per process, as a share of one core (2 cores busy = 2). */
export type CpuShare = Record<string, number>;

/** `lost`: sent, acknowledged or not, with no reply by the end of the step's wait. */
export interface StepResult extends ReplyCounts {
  /** Offered rate, requests per second. */
  rate: number;
  durationS: number;
  /** Terminal replies received, ok or error. */
  answered: number;
  /** Replies per second over the sending window. */
  achievedRate: number;
  latencyMs: Latency;
  /** Zero lost, no error replies and p99 under the bench's ceiling (`p99LimitMs`). */
  passed: boolean;
  cpu: CpuShare;
  /** Resident memory of the system under test at the step's end, MB. */
  rssMb: number;
  /** The bridge's `queue_full` refusals by its overload guards in this step, by reason (its /metrics). */
  shed?: Record<string, number>;
  /**
   * Systems on Redis, per answered request: Redis commands (those inside scripts included),
   * calls (round trips: the reads Redis served), Redis CPU µs, and the busiest commands.
   */
  redis?: { commands: number; calls: number; cpuUs: number; top: Record<string, number> };
}

export interface OverloadResult extends ReplyCounts {
  rate: number;
  durationS: number;
  /**
   * The bridge's OVERLOAD_QUEUE_WAIT_MS in this run: 0 is the default (the queue-wait guard
   * off). Absent for a system without that setting (the BullMQ-built bridge).
   */
  queueWaitMs?: number;
  /** The ttl_ms every request of the step carried; absent when none did (`--overload-ttl-ms 0`). */
  ttlMs?: number;
  /** `expired` replies (also in `errors`). */
  expired: number;
  /** With ttlMs: replies, ok or not, more than 100 ms after publish + ttl_ms: the deadline promise broken. */
  late: number;
  /** expired and late by priority, and each priority's reply time. */
  byPriority: Record<Priority, { expired: number; late: number; latencyMs: { p50: number; p99: number } | null }>;
  rssStartMb: number;
  rssEndMb: number;
  /** Publish to reply, of every reply (ok or refused): answering late is not shedding. */
  latencyMs: { p50: number; p99: number };
  /** The process was still running and answering after the step. */
  survived: boolean;
  /** As StepResult's. */
  shed?: Record<string, number>;
}

export type SystemId =
  | 'echo'
  | 'handler'
  | 'handler-thread'
  | 'bullmq'
  | 'memory'
  | 'redis'
  | 'redis-x2'
  /** 1, 2 or 3 bridges with BROKER_URL on a private Mosquitto and one Redis. */
  | 'plant-x1'
  | 'plant-x2'
  | 'plant-x3';

export interface SystemResult {
  id: SystemId;
  label: string;
  /** Highest passing rate of the step search, requests per second; 0 if none passed. */
  maxRate: number;
  /** Latency over the upstream's fixed latency at 1 000 req/s (for echo: the whole latency). */
  overheadAt1000Ms: Latency | null;
  /** CPU per process at the highest passing step. */
  cpuAtMax: CpuShare;
  /** Resident memory of the system under test at the highest passing step, MB. */
  rssMb: number;
  steps: StepResult[];
  /**
   * The overload step at twice maxRate, once per setting: first with the bench's
   * OVERLOAD_QUEUE_WAIT_MS, then (the bridges that have it) on a fresh system with the default.
   */
  overload?: OverloadResult[];
}

export interface IdleResult {
  devices: number;
  connected: number;
  /** Connected devices whose connection closed before the end. */
  dropped: number;
  rssBeforeMb: number;
  /** Highest RSS while connecting and under the light load. */
  rssPeakMb: number;
  /** RSS once V8 has given back the connection burst's garbage (or after settleS seconds). */
  rssSettledMb: number;
  peakPerConnectionKb: number;
  settledPerConnectionKb: number;
  /** The longest wait for the settled figure. */
  settleS: number;
  /** Why fewer devices than asked were tried (the file-descriptor limit), if so. */
  note?: string;
  /** A light load run beside the idle devices. */
  lightLoad: { rate: number; latencyMs: Latency; lost: number };
}

export interface BenchResults {
  startedAt: string;
  command: string;
  quick: boolean;
  machine: { cpus: number; cpuModel: string; memoryGb: number; node: string; redis: string; os: string };
  upstreamLatencyMs: number;
  /** Ceiling for a step to pass. */
  p99LimitMs: number;
  /** The load generator's own ceiling: the echo system's max rate is bounded by it. */
  generator: { workers: number; connections: number };
  systems: SystemResult[];
  idle?: IdleResult;
  durationS: number;
}
