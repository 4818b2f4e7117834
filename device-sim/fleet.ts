// The device fleet: many MQTT connections sending requests at a fixed fleet-wide rate and
// matching replies by id, so the bridge can be measured end to end as devices see it.
import { performance } from 'node:perf_hooks';
import type { MqttClient } from 'mqtt';
import type { BridgeClient } from '../client/index.js';
import { type Priority, topics } from '../contract/index.js';
import { emptyDiagnosis, notePublishRefused, type Diagnosis } from './diagnosis.js';
import { callWithClient, connectClient, type ClientOutcome } from './fleet-client.js';
import { connectDevice, endClient, firstChunkOf, readReply, requestPayload } from './fleet-device.js';
import { checkFleetOptions, deviceIds, FLEET_DEFAULTS, redactUrl, type FleetOptions } from './fleet-options.js';
import type { LiveCounts } from './progress.js';
import {
  buildReport,
  emptyTally,
  pickPriority,
  recordFailure,
  recordFirstChunk,
  recordLost,
  recordReply,
  recordSent,
  type FleetReport,
  type ReportConfig,
  type Tally,
} from './stats.js';

export type { FleetReport, Mix } from './stats.js';
export { parseFleetArgs, type FleetArgs } from './fleet-args.js';
export type { FleetOptions } from './fleet-options.js';

interface Pending {
  priority: Priority;
  sentAt: number;
}

interface Device {
  id: string;
  client: MqttClient;
  /** With `client`: the device's BridgeClient, whose connection `client` is. */
  bridge?: BridgeClient;
  pending: Map<string, Pending>;
  seq: number;
}

/** One run: its resolved settings and everything it counts while it goes. */
interface Run {
  opts: FleetOptions;
  replyTimeoutMs: number;
  prefix: string;
  progress: (line: string) => void;
  random: () => number;
  tally: Tally;
  diagnosis: Diagnosis;
  devices: Map<string, Device>;
  /** Requests sent and not yet settled (replied to, or failed to publish). */
  outstanding: number;
  lastReplyAt: number;
  /** Ends the wait for replies early, once nothing is outstanding. */
  wakeWaiter: (() => void) | null;
}

/** Small, fast, seedable PRNG (mulberry32): reproducible priority sequences for a given seed. */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

export async function runFleet(opts: FleetOptions): Promise<FleetReport> {
  const problem = checkFleetOptions(opts);
  if (problem !== null) throw new RangeError(problem);
  const run = newRun(opts);
  const ids = deviceIds(run.prefix, opts.devices);
  run.progress(`connecting ${ids.length} devices to ${redactUrl(opts.url)}`);
  const connectError = await connectAll(run, ids, opts.connectConcurrency ?? FLEET_DEFAULTS.connectConcurrency);
  try {
    if (connectError !== null) throw connectError;
    const fleet = ids.map((id) => run.devices.get(id) as Device);
    const { start, sendEnd, total } = await sendOnSchedule(run, fleet);
    await waitForReplies(run, sendEnd, total);
    for (const device of fleet) {
      for (const p of device.pending.values()) recordLost(run.tally, p.priority);
      device.pending.clear();
    }
    run.outstanding = 0;
    return buildReport(run.tally, (Math.max(sendEnd, run.lastReplyAt) - start) / 1000, reportConfig(run), run.diagnosis);
  } finally {
    run.progress(`closing ${run.devices.size} connections`);
    await Promise.all([...run.devices.values()].map((d) => (d.bridge ? d.bridge.close() : endClient(d.client))));
  }
}

function newRun(opts: FleetOptions): Run {
  return {
    opts,
    replyTimeoutMs: opts.replyTimeoutMs ?? FLEET_DEFAULTS.replyTimeoutMs,
    prefix: opts.prefix ?? FLEET_DEFAULTS.prefix,
    progress: opts.onProgress ?? ((): void => {}),
    random: opts.seed === undefined ? Math.random : seededRandom(opts.seed),
    tally: emptyTally(),
    diagnosis: emptyDiagnosis(true),
    devices: new Map(),
    outstanding: 0,
    lastReplyAt: 0,
    wakeWaiter: null,
  };
}

/** Connects every device, `concurrency` at a time; stops at the first failure and returns it (null if none). */
async function connectAll(run: Run, ids: string[], concurrency: number): Promise<unknown> {
  let next = 0;
  let connectError: unknown = null;
  const worker = async (): Promise<void> => {
    while (connectError === null && next < ids.length) {
      const id = ids[next] as string;
      const events = {
        onMessage: (deviceId: string, topic: string, payload: Buffer) => onMessage(run, deviceId, topic, payload),
        diagnosis: run.diagnosis,
        watchStatus: next === 0,
      };
      next += 1;
      try {
        if (run.opts.client === true) {
          const bridge = await connectClient(run.opts, id, run.replyTimeoutMs, events);
          run.devices.set(id, { id, client: bridge.connection, bridge, pending: new Map(), seq: 0 });
        } else {
          const client = await connectDevice(run.opts, id, events);
          run.devices.set(id, { id, client, pending: new Map(), seq: 0 });
        }
      } catch (err) {
        connectError ??= new Error(`device ${id}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, ids.length) }, worker));
  return connectError;
}

/** Takes a request off the device's pending list; null if it was not pending (unknown id, or already settled). */
function settle(run: Run, device: Device, id: string): Pending | null {
  const p = device.pending.get(id);
  if (p === undefined) return null;
  device.pending.delete(id);
  run.outstanding -= 1;
  if (run.outstanding === 0) run.wakeWaiter?.();
  return p;
}

function onMessage(run: Run, deviceId: string, topic: string, payload: Buffer): void {
  const now = performance.now();
  const device = run.devices.get(deviceId);
  if (topic === topics.stream(deviceId)) {
    // A chunk after its reply, or for an unknown id, finds nothing pending.
    const p = device?.pending.get(firstChunkOf(payload) ?? '');
    if (p !== undefined) recordFirstChunk(run.tally, p.priority, now - p.sentAt);
    return;
  }
  const reply = readReply(payload);
  if (device === undefined || reply === null) return;
  // Unknown ids and duplicates (already settled) find nothing pending and are ignored.
  const p = settle(run, device, reply.id);
  if (p === null) return;
  const latency = now - p.sentAt;
  // Late replies are still "no reply within the timeout", the contract's definition of lost.
  if (latency > run.replyTimeoutMs) recordLost(run.tally, p.priority);
  else {
    recordReply(run.tally, p.priority, reply.outcome, latency, run.opts.ttlMs);
    run.lastReplyAt = now;
  }
}

/** Sends rate × duration requests round-robin over the fleet; returns when sending started and ended. */
async function sendOnSchedule(run: Run, fleet: Device[]): Promise<{ start: number; sendEnd: number; total: number }> {
  const { rate, durationS } = run.opts;
  const total = Math.max(1, Math.round(rate * durationS));
  const intervalMs = 1000 / rate;
  run.progress(`sending ${total} requests at ${rate}/s for ${durationS} s`);
  run.opts.onLive?.(() => liveCounts(run));
  // Send k is due at start + k·interval: a late timer catches up instead of shifting the schedule.
  const start = performance.now();
  let k = 0;
  while (k < total) {
    const now = performance.now();
    while (k < total && start + k * intervalMs <= now) sendOne(run, fleet[k++ % fleet.length] as Device);
    if (k < total) await sleep(start + k * intervalMs - performance.now());
  }
  return { start, sendEnd: performance.now(), total };
}

function sendOne(run: Run, device: Device): void {
  const { opts, tally, random } = run;
  device.seq += 1;
  const question = opts.questions === undefined ? undefined : Math.floor(random() * opts.questions);
  const request = requestPayload(device.id, device.seq, question, opts.ttlMs, opts.stream);
  const priority = pickPriority(opts.mix, random);
  device.pending.set(request.id, { priority, sentAt: performance.now() });
  run.outstanding += 1;
  recordSent(tally, priority);
  if (device.bridge !== undefined) return sendWithClient(run, device, request, priority);
  const { images } = opts;
  const [topic, payload] = images
    ? [topics.image(device.id, priority, images.template, request.id), images.frame(device.seq)]
    : [topics.infer(device.id, priority), JSON.stringify(request)];
  device.client.publish(topic, payload, { qos: opts.qos }, (err, packet) => {
    if (err === undefined || err === null) return;
    // An MQTT 5 PUBACK with a reason code: the broker refused the publish.
    const code = (err as { code?: unknown }).code;
    const refused = typeof code === 'number';
    if (refused)
      notePublishRefused(run.diagnosis, device.id, code, (packet as { properties?: { reasonString?: string } } | undefined)?.properties?.reasonString);
    // Only count it if no reply beat the failure report.
    if (settle(run, device, request.id) !== null) recordFailure(tally, priority, refused ? 'publish_refused' : 'publish_failed');
  });
}

function sendWithClient(run: Run, device: Device, request: ReturnType<typeof requestPayload>, priority: Priority): void {
  const sentAt = performance.now();
  const onFirstChunk = (): void => recordFirstChunk(run.tally, priority, performance.now() - sentAt);
  void callWithClient(device.bridge as BridgeClient, run.opts, device.seq, { request, priority, onFirstChunk }).then((outcome) =>
    onClientOutcome(run, device, request.id, outcome),
  );
}

/** A client call's end, tallied as the raw devices' replies and failures are. */
function onClientOutcome(run: Run, device: Device, id: string, outcome: ClientOutcome): void {
  const now = performance.now();
  const p = settle(run, device, id);
  if (p === null || outcome.kind === 'gone') return;
  if (outcome.kind === 'lost') return recordLost(run.tally, p.priority);
  if (outcome.kind === 'refused') {
    if (outcome.reasonCode !== undefined) notePublishRefused(run.diagnosis, device.id, outcome.reasonCode, outcome.message);
    return recordFailure(run.tally, p.priority, outcome.reasonCode !== undefined ? 'publish_refused' : 'publish_failed');
  }
  const { reply } = outcome;
  recordReply(run.tally, p.priority, 'code' in reply ? { ok: false, code: reply.code } : { ok: true }, now - p.sentAt, run.opts.ttlMs);
  run.lastReplyAt = now;
}

/** What the progress line shows: every priority's counts summed, and what is in flight. */
function liveCounts(run: Run): LiveCounts {
  const counts: LiveCounts = { sent: 0, ok: 0, errors: {}, inFlight: run.outstanding, diagnosis: run.diagnosis };
  for (const t of Object.values(run.tally)) {
    counts.sent += t.sent;
    counts.ok += t.ok;
    for (const [code, n] of Object.entries(t.errors)) counts.errors[code] = (counts.errors[code] ?? 0) + n;
  }
  return counts;
}

/** Waits until every reply is in, or the reply timeout after the last send. */
async function waitForReplies(run: Run, sendEnd: number, total: number): Promise<void> {
  if (run.outstanding === 0) return;
  run.progress(`sent ${total}; waiting up to ${run.replyTimeoutMs} ms for ${run.outstanding} replies`);
  const waitMs = sendEnd + run.replyTimeoutMs - performance.now();
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, Math.max(0, waitMs));
    run.wakeWaiter = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  run.wakeWaiter = null;
}

function reportConfig(run: Run): ReportConfig {
  const { opts } = run;
  return {
    url: redactUrl(opts.url),
    devices: opts.devices,
    rate: opts.rate,
    durationS: opts.durationS,
    mix: opts.mix,
    qos: opts.qos,
    replyTimeoutMs: run.replyTimeoutMs,
    prefix: run.prefix,
    workers: 0,
    ...(opts.mqtt5 === true ? { mqtt5: true as const } : {}),
    ...(opts.ttlMs === undefined ? {} : { ttlMs: opts.ttlMs }),
    ...(opts.stream === true ? { stream: true as const } : {}),
    ...(opts.client === true ? { client: true as const } : {}),
  };
}
