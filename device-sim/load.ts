// The load generator: a fleet of devices spread over worker threads (load-worker.ts), driven
// step by step at a fixed rate; each step's latencies come back as HDR histograms and are merged.
import { Worker } from 'node:worker_threads';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import * as hdr from 'hdr-histogram-js';
import { PRIORITIES, type Priority } from '../contract/index.js';
import type { StepReport, WorkerInit, WorkerMessage, WorkerReply } from './load-protocol.js';
import type { Login } from './credentials.js';
import type { LatencySummary, ReplyCounts } from './stats.js';

export interface LoadOptions {
  host: string;
  /** Device n connects to ports[n % ports.length]: several instances share one fleet. */
  ports: number[];
  devices: number;
  workers: number;
  mix: Record<Priority, number>;
  /** Device ids are `${prefix}-${n}`. */
  prefix: string;
  /** Each device's broker login; none by default. */
  login?: (deviceId: string) => Login;
}

export interface StepSummary extends ReplyCounts {
  rate: number;
  durationS: number;
  duplicates: number;
  /** Device connections the broker dropped since the fleet started, and the first reason. */
  disconnects: number;
  firstDisconnect?: string;
  /** Replies per second over the sending window. */
  achievedRate: number;
  /** The sending window, measured (the longest worker's). */
  sendS: number;
  latencyMs: LatencySummary;
  /** The ttl_ms every request of the step carried; absent when none did. */
  ttlMs?: number;
  /** With ttlMs: replies, ok or not, more than 100 ms after publish + ttl_ms (stats.ts isLate). */
  late: number;
  /** Per priority; `expired`: error replies with that code (also in `errors`). */
  byPriority: Record<Priority, ReplyCounts & { answered: number; latencyMs: LatencySummary | null; expired: number; late: number }>;
  /** Bridges whose status the first device read on bridge/+/status (instance → state), and whether it was refused. */
  bridges: Record<string, string>;
  statusRefused: boolean;
  /** Most requests any worker fell behind its schedule: large values mean the generator was the limit. */
  generatorBehind: number;
}

export interface StepOptions {
  /** The first `leadS` seconds are sent but not recorded (see StepCommand.leadMs). */
  leadS?: number;
  /** Every request of the step carries this `ttl_ms` (a positive integer); none by default. */
  ttlMs?: number;
  onProgress?: (p: StepProgress) => void;
}

export interface StepProgress {
  elapsedS: number;
  sent: number;
  answered: number;
  ok: number;
  /** Error replies by code. */
  errors: Record<string, number>;
}

export interface LoadFleet {
  readonly devices: number;
  readonly workers: number;
  step(rate: number, durationS: number, waitMs: number, options?: StepOptions): Promise<StepSummary>;
  /**
   * Waits until every request sent so far is answered, maxMs passed, or no reply came for
   * stallMs (replies owed by dropped connections never come); resolves with the rest.
   */
  drain(maxMs: number, stallMs: number): Promise<number>;
  close(): Promise<void>;
}

/** dist/device-sim/load-worker.js, whether this module runs from dist or (in tests) from source. */
function workerScript(): string {
  for (const rel of ['./load-worker.js', '../dist/device-sim/load-worker.js']) {
    const path = fileURLToPath(new URL(rel, import.meta.url));
    if (path.includes('/dist/') && existsSync(path)) return path;
  }
  throw new Error('dist/device-sim/load-worker.js is missing: run `npm run build` first');
}

class WorkerHandle {
  private waiting: { type: WorkerReply['type']; resolve: (r: WorkerReply) => void; reject: (e: Error) => void } | null = null;
  progress: { sent: number; ok: number; errors: Record<string, number> } = { sent: 0, ok: 0, errors: {} };
  failure: string | null = null;

  constructor(readonly worker: Worker) {
    worker.on('message', (reply: WorkerReply) => {
      if (reply.type === 'progress') {
        this.progress = { sent: reply.sent, ok: reply.ok, errors: reply.errors };
        return;
      }
      if (reply.type === 'error') {
        this.failure ??= reply.message;
        this.waiting?.reject(new Error(reply.message));
        this.waiting = null;
        return;
      }
      if (this.waiting?.type === reply.type) {
        this.waiting.resolve(reply);
        this.waiting = null;
      }
    });
    worker.on('error', (err) => {
      this.failure ??= err.message;
      this.waiting?.reject(err);
    });
  }

  request<T extends WorkerReply['type']>(message: WorkerMessage, expect: T): Promise<Extract<WorkerReply, { type: T }>> {
    return new Promise((resolve, reject) => {
      this.waiting = { type: expect, resolve: resolve as (r: WorkerReply) => void, reject };
      this.worker.postMessage(message);
    });
  }
}

export async function startLoad(options: LoadOptions): Promise<LoadFleet> {
  const run = randomBytes(3).toString('hex');
  const width = String(options.devices).length;
  const ids = Array.from({ length: options.devices }, (_, i) => `${options.prefix}-${String(i + 1).padStart(width, '0')}`);
  const workerCount = Math.max(1, Math.min(options.workers, options.devices));
  const script = workerScript();
  const handles = Array.from({ length: workerCount }, (_, w) => {
    const init: WorkerInit = {
      host: options.host,
      devices: ids.flatMap((id, i) => (i % workerCount === w ? [{ id, port: options.ports[i % options.ports.length]!, ...options.login?.(id) }] : [])),
      tag: `${run}${w}-`,
      mix: options.mix,
      watchStatus: w === 0,
    };
    return new WorkerHandle(new Worker(script, { workerData: init }));
  });
  const terminate = (): Promise<unknown> => Promise.all(handles.map((h) => h.worker.terminate()));
  try {
    await Promise.all(handles.map((h) => h.request({ type: 'connect' }, 'connected')));
  } catch (err) {
    await terminate();
    throw err;
  }

  return {
    devices: ids.length,
    workers: workerCount,
    async step(rate, durationS, waitMs, { leadS = 0, ttlMs, onProgress } = {}) {
      const started = Date.now();
      for (const h of handles) h.progress = { sent: 0, ok: 0, errors: {} };
      const ticker = onProgress ? setInterval(() => onProgress(progressOf(handles, (Date.now() - started) / 1000)), 500) : undefined;
      try {
        const step = { rate: rate / workerCount, durationMs: durationS * 1000, leadMs: leadS * 1000, waitMs, ...(ttlMs === undefined ? {} : { ttlMs }) };
        const reports = await Promise.all(handles.map((h) => h.request({ type: 'step', step }, 'step')));
        return summarize(
          rate,
          durationS,
          reports.map((r) => r.report),
          ttlMs,
        );
      } finally {
        clearInterval(ticker);
      }
    },
    async drain(maxMs, stallMs) {
      const replies = await Promise.all(handles.map((h) => h.request({ type: 'drain', maxMs, stallMs }, 'drained')));
      return replies.reduce((n, r) => n + r.pending, 0);
    },
    async close() {
      await Promise.all(handles.map((h) => h.request({ type: 'close' }, 'closed').catch(() => undefined)));
      await terminate();
    },
  };
}

function progressOf(handles: WorkerHandle[], elapsedS: number): StepProgress {
  const p: StepProgress = { elapsedS, sent: 0, answered: 0, ok: 0, errors: {} };
  for (const { progress } of handles) {
    p.sent += progress.sent;
    p.ok += progress.ok;
    for (const [code, n] of Object.entries(progress.errors)) p.errors[code] = (p.errors[code] ?? 0) + n;
  }
  p.answered = p.ok + Object.values(p.errors).reduce((a, b) => a + b, 0);
  return p;
}

const newHistogram = (): hdr.Histogram => hdr.build({ bitBucketSize: 32, autoResize: true, numberOfSignificantValueDigits: 3, useWebAssembly: false });

function latencyOf(h: hdr.Histogram): LatencySummary {
  const ms = (us: number): number => Math.round(us / 10) / 100;
  return {
    p50: ms(h.getValueAtPercentile(50)),
    p95: ms(h.getValueAtPercentile(95)),
    p99: ms(h.getValueAtPercentile(99)),
    max: ms(h.maxValue),
  };
}

export function summarize(rate: number, durationS: number, reports: StepReport[], ttlMs?: number): StepSummary {
  const overall = newHistogram();
  const byPriority = {} as StepSummary['byPriority'];
  PRIORITIES.forEach((priority, i) => {
    const merged = newHistogram();
    for (const r of reports) merged.add(hdr.decodeFromCompressedBase64(r.histograms[i]!, 32, false));
    overall.add(merged);
    const counts = reports.map((r) => r.byPriority[i]!);
    const errorsOf: Record<string, number> = {};
    for (const c of counts) for (const [code, n] of Object.entries(c.errors)) errorsOf[code] = (errorsOf[code] ?? 0) + n;
    byPriority[priority] = {
      sent: counts.reduce((n, c) => n + c.sent, 0),
      ok: counts.reduce((n, c) => n + c.ok, 0),
      errors: errorsOf,
      lost: counts.reduce((n, c) => n + c.lost, 0),
      answered: merged.totalCount,
      latencyMs: merged.totalCount > 0 ? latencyOf(merged) : null,
      expired: reports.reduce((n, r) => n + r.expired[i]!, 0),
      late: reports.reduce((n, r) => n + r.late[i]!, 0),
    };
  });
  const errors: Record<string, number> = {};
  for (const r of reports) for (const [code, n] of Object.entries(r.errors)) errors[code] = (errors[code] ?? 0) + n;
  const sent = reports.reduce((n, r) => n + r.sent, 0);
  const ok = reports.reduce((n, r) => n + r.ok, 0);
  const sendS = Math.max(...reports.map((r) => r.sendMs)) / 1000;
  const answered = ok + Object.values(errors).reduce((a, b) => a + b, 0);
  const firstDisconnect = reports.find((r) => r.firstDisconnect !== undefined)?.firstDisconnect;
  return {
    rate,
    durationS,
    sent,
    ok,
    errors,
    lost: reports.reduce((n, r) => n + r.lost, 0),
    duplicates: reports.reduce((n, r) => n + r.duplicates, 0),
    disconnects: reports.reduce((n, r) => n + r.disconnects, 0),
    ...(firstDisconnect === undefined ? {} : { firstDisconnect }),
    achievedRate: Math.round(answered / sendS),
    sendS,
    latencyMs: overall.totalCount > 0 ? latencyOf(overall) : { p50: 0, p95: 0, p99: 0, max: 0 },
    ...(ttlMs === undefined ? {} : { ttlMs }),
    late: PRIORITIES.reduce((n, p) => n + byPriority[p].late, 0),
    byPriority,
    generatorBehind: Math.max(...reports.map((r) => r.maxBehind)),
    bridges: Object.assign({}, ...reports.map((r) => r.bridges)) as Record<string, string>,
    statusRefused: reports.some((r) => r.statusRefused),
  };
}
