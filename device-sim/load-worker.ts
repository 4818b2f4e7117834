// One load-generator thread: a share of the fleet's devices on raw sockets speaking MQTT 3.1.1.
// Requests are written as hand-built PUBLISH frames and latencies go into HDR histograms, so the
// generator costs a few microseconds per request and the system under test stays the bottleneck.
import { parentPort, workerData } from 'node:worker_threads';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import * as mqttPacket from 'mqtt-packet';
import * as hdr from 'hdr-histogram-js';
import { PRIORITIES, type Priority } from '../contract/index.js';
import { encodedTopic, publishFrame, pubackFrame } from './mqtt-frames.js';
import { isLate, type ReplyCounts } from './stats.js';
import type { StepCommand, StepReport, WorkerInit, WorkerMessage, WorkerReply } from './load-protocol.js';

const init = workerData as WorkerInit;
const port = parentPort!;

type DeviceSpec = WorkerInit['devices'][number];

interface Device {
  id: string;
  spec: DeviceSpec;
  socket: Socket;
  /** PUBLISH topic per priority, encoded once. */
  topics: Buffer[];
  packetId: number;
  /** The broker dropped it (its backlog limit, say): its pending requests stay unanswered, so lost. */
  dead: boolean;
}

const enum State {
  Pending = 1,
  Answered = 2,
}

// Per request, indexed by its sequence number: an id is `${tag}${seq}`.
const sentAt: number[] = [];
const priorityOf: number[] = [];
const state: State[] = [];
let nextSeq = 0;
/** Sent and not yet answered, over every step so far, and of the current step. */
let pendingCount = 0;
let stepPending = 0;

const newHistogram = (): hdr.Histogram => hdr.build({ bitBucketSize: 32, autoResize: true, numberOfSignificantValueDigits: 3, useWebAssembly: false });

interface Tally {
  /** Latency in microseconds per priority. */
  histograms: hdr.Histogram[];
  ok: number;
  errors: Record<string, number>;
  duplicates: number;
  /** Per priority: `expired` replies, and replies after the deadline + 100 ms (stats.ts isLate). */
  expired: number[];
  late: number[];
  /** Per priority: sent, ok, errors (lost is counted at the end of the step). */
  counts: ReplyCounts[];
}

const newTally = (): Tally => ({
  histograms: PRIORITIES.map(newHistogram),
  ok: 0,
  errors: {},
  duplicates: 0,
  expired: PRIORITIES.map(() => 0),
  late: PRIORITIES.map(() => 0),
  counts: PRIORITIES.map(() => ({ sent: 0, ok: 0, errors: {}, lost: 0 })),
});
/** Bridges whose status the watching device read: instance → state. */
const bridges: Record<string, string> = {};
let statusRefused = false;
/** The current step's ttl_ms, carried by each of its requests; undefined = none. */
let ttlMs: number | undefined;
/** `,"ttl_ms":N` as it goes into each request of the step, or nothing. */
let ttlField = '';
let tally = newTally();
let stepFirstSeq = 0;
/** Requests sent before this time are answered and counted but their latency is not recorded. */
let recordFrom = 0;

function onReply(payload: Buffer): void {
  const now = performance.now();
  let id: string;
  let ok: boolean;
  let code = '';
  // Replies are JSON.stringify'd objects with id and ok first: read those without a full parse.
  const head = payload.toString('latin1', 0, Math.min(payload.length, 120));
  const idEnd = head.startsWith('{"id":"') ? head.indexOf('"', 7) : -1;
  if (idEnd > 0 && head.startsWith(',"ok":true', idEnd + 1)) {
    id = head.slice(7, idEnd);
    ok = true;
  } else {
    let reply: { id?: unknown; ok?: unknown; error?: { code?: unknown } };
    try {
      reply = JSON.parse(payload.toString('utf8')) as typeof reply;
    } catch {
      tally.errors.unparseable = (tally.errors.unparseable ?? 0) + 1;
      return;
    }
    if (typeof reply.id !== 'string') {
      tally.errors.no_id = (tally.errors.no_id ?? 0) + 1;
      return;
    }
    id = reply.id;
    ok = reply.ok === true;
    code = String(reply.error?.code ?? 'unknown');
  }
  if (!id.startsWith(init.tag)) return;
  const seq = Number.parseInt(id.slice(init.tag.length), 36);
  if (!(seq >= 0 && seq < nextSeq)) return;
  if (state[seq] !== State.Pending) {
    tally.duplicates += 1;
    return;
  }
  state[seq] = State.Answered;
  pendingCount -= 1;
  // Late replies to an earlier step are not this step's figures.
  if (seq < stepFirstSeq) return;
  stepPending -= 1;
  const sent = sentAt[seq]!;
  const priority = priorityOf[seq]!;
  if (sent >= recordFrom) tally.histograms[priority]!.recordValue(Math.max(1, Math.round((now - sent) * 1000)));
  if (isLate(now - sent, ttlMs)) tally.late[priority]! += 1;
  const counts = tally.counts[priority]!;
  if (ok) {
    tally.ok += 1;
    counts.ok += 1;
  } else {
    tally.errors[code] = (tally.errors[code] ?? 0) + 1;
    counts.errors[code] = (counts.errors[code] ?? 0) + 1;
    if (code === 'expired') tally.expired[priority]! += 1;
  }
}

function onStatus(payload: Buffer): void {
  try {
    const status = JSON.parse(payload.toString('utf8')) as { instance?: unknown; state?: unknown };
    if (typeof status.instance === 'string' && typeof status.state === 'string') bridges[status.instance] = status.state;
  } catch {
    // Not a bridge's status.
  }
}

/** Why a connect failed, saying what to do about it. */
function connectFailure(err: NodeJS.ErrnoException, brokerPort: number): Error {
  if (err.code !== 'ECONNREFUSED') return err;
  return new Error(`connection refused by ${init.host}:${brokerPort}: nothing listens there (start the bridge, or point --url at its broker)`);
}

function connectDevice(spec: DeviceSpec, watchStatus = false): Promise<Device> {
  const { id, port: brokerPort } = spec;
  return new Promise((resolve, reject) => {
    const socket = connect({ host: init.host, port: brokerPort, noDelay: true });
    const parser = mqttPacket.parser({ protocolVersion: 4 });
    const device: Device = {
      id,
      spec,
      socket,
      topics: PRIORITIES.map((p) => encodedTopic(`devices/${id}/infer/${p}`)),
      packetId: 0,
      dead: false,
    };
    let ready = false;
    const fail = (err: Error): void => {
      if (!ready) return reject(new Error(`${id}: ${connectFailure(err, brokerPort).message}`));
      if (device.dead || closing) return;
      device.dead = true;
      disconnects += 1;
      firstDisconnect ??= `${id}: ${err.message}`;
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed by the broker')));
    socket.on('data', (chunk) => parser.parse(chunk));
    parser.on('error', fail);
    parser.on('packet', (packet) => {
      switch (packet.cmd) {
        case 'connack': {
          if (packet.returnCode !== 0) return fail(new Error(refusedLogin(spec, packet.returnCode ?? 0)));
          const subscriptions = [{ topic: `devices/${id}/result`, qos: 1 as const }, ...(watchStatus ? [{ topic: 'bridge/+/status', qos: 0 as const }] : [])];
          socket.write(mqttPacket.generate({ cmd: 'subscribe', messageId: 1, subscriptions }));
          return;
        }
        case 'suback':
          if (packet.granted[0] === 128) return fail(new Error(`subscription to devices/${id}/result refused by the broker (SUBACK 128)`));
          if (packet.granted[1] === 128) statusRefused = true;
          ready = true;
          return resolve(device);
        case 'publish':
          if (packet.qos > 0 && packet.messageId !== undefined) socket.write(pubackFrame(packet.messageId));
          if (packet.topic.startsWith('bridge/')) onStatus(packet.payload as Buffer);
          else onReply(packet.payload as Buffer);
          return;
        default:
          return;
      }
    });
    const connectPacket: mqttPacket.IConnectPacket = {
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clientId: id,
      clean: true,
      // Aedes refuses 0 when KEEPALIVE_LIMIT_S is set; a run never idles this long.
      keepalive: 300,
    };
    if (spec.username !== undefined) connectPacket.username = spec.username;
    if (spec.password !== undefined) connectPacket.password = Buffer.from(spec.password);
    socket.write(mqttPacket.generate(connectPacket));
  });
}

function refusedLogin(spec: DeviceSpec, code: number): string {
  const who = spec.username === undefined ? 'an anonymous login' : `the login of user "${spec.username}"`;
  const why = { 4: 'bad user name or password', 5: 'not authorized' }[code] ?? 'refused';
  return `the broker refused ${who}: ${why} (CONNACK ${code}); check --username, --password or --password-file`;
}

let devices: Device[] = [];
let closing = false;
let disconnects = 0;
let firstDisconnect: string | undefined;
let nextDevice = 0;
/** The priority of request n follows this 100-slot pattern, so every step sees the same mix. */
let mixPattern: number[] = [];

function buildMixPattern(weights: Record<Priority, number>): number[] {
  const total = PRIORITIES.reduce((sum, p) => sum + weights[p], 0);
  const pattern: number[] = [];
  const credit = PRIORITIES.map(() => 0);
  // Interleaved rather than blocked, so a short step still sees every class.
  for (let slot = 0; slot < 100; slot += 1) {
    PRIORITIES.forEach((p, i) => (credit[i]! += weights[p] / total));
    let best = 0;
    credit.forEach((c, i) => {
      if (c > credit[best]!) best = i;
    });
    credit[best]! -= 1;
    pattern.push(best);
  }
  return pattern;
}

function requestPayload(id: string, seq: number): Buffer {
  // About 300 bytes, every text distinct, so neither the cache nor coalescing answers it.
  return Buffer.from(
    `{"id":"${id}","messages":[{"role":"system","content":"You inspect welds on line B. Answer ok or defect."},` +
      `{"role":"user","content":"Camera ${seq % 64} frame ${id}: seam continuous, bead width 4.1 mm, ` +
      `porosity none visible, temperature 71.4 C, shift 2. Verdict?"}],"max_tokens":16${ttlField}}`,
  );
}

function sendOne(): void {
  let device = devices[nextDevice]!;
  for (let tries = 0; device.dead && tries < devices.length; tries += 1) {
    nextDevice = (nextDevice + 1) % devices.length;
    device = devices[nextDevice]!;
  }
  nextDevice = (nextDevice + 1) % devices.length;
  if (device.dead) return; // every connection is gone: nothing can be sent
  const seq = nextSeq++;
  const priority = mixPattern[seq % mixPattern.length]!;
  device.packetId = device.packetId === 0xffff ? 1 : device.packetId + 1;
  sentAt[seq] = performance.now();
  priorityOf[seq] = priority;
  tally.counts[priority]!.sent += 1;
  state[seq] = State.Pending;
  pendingCount += 1;
  stepPending += 1;
  device.socket.write(publishFrame(device.topics[priority]!, device.packetId, requestPayload(`${init.tag}${seq.toString(36)}`, seq)));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Devices a broker dropped in an earlier step come back, so each step offers its full rate. */
async function reconnectDropped(): Promise<void> {
  for (let i = 0; i < devices.length; i += 1) {
    const device = devices[i]!;
    if (!device.dead) continue;
    try {
      devices[i] = await connectDevice(device.spec, i === 0 && init.watchStatus);
    } catch {
      // Still refused: it stays dead and this step sends on the others.
    }
  }
}

async function runStep(step: StepCommand): Promise<StepReport> {
  await reconnectDropped();
  tally = newTally();
  ttlMs = step.ttlMs;
  ttlField = ttlMs === undefined ? '' : `,"ttl_ms":${ttlMs}`;
  stepFirstSeq = nextSeq;
  stepPending = 0;
  const start = performance.now();
  const end = start + step.durationMs;
  recordFrom = start + step.leadMs;
  let maxBehind = 0;
  let scheduled = 0;
  const progress = setInterval(() => {
    port.postMessage({ type: 'progress', sent: nextSeq - stepFirstSeq, ok: tally.ok, errors: tally.errors } satisfies WorkerReply);
  }, 500);
  // Paced against the clock, not by fixed intervals, so timer jitter does not lower the rate.
  for (;;) {
    const now = performance.now();
    if (now >= end) break;
    const due = Math.floor(((now - start) / 1000) * step.rate);
    const behind = due - scheduled;
    if (behind > maxBehind) maxBehind = behind;
    for (let i = 0; i < behind; i += 1) sendOne();
    scheduled = due;
    await sleep(1);
  }
  const sent = nextSeq - stepFirstSeq;
  const sendMs = performance.now() - start;
  const waitUntil = performance.now() + step.waitMs;
  while (performance.now() < waitUntil && stepPending > 0) await sleep(20);
  clearInterval(progress);
  const lost = stepPending;
  for (let seq = stepFirstSeq; seq < nextSeq; seq += 1) if (state[seq] === State.Pending) tally.counts[priorityOf[seq]!]!.lost += 1;
  return {
    sent,
    sendMs,
    ok: tally.ok,
    errors: tally.errors,
    lost,
    duplicates: tally.duplicates,
    disconnects,
    ...(firstDisconnect === undefined ? {} : { firstDisconnect }),
    // A generator that fell this far behind its schedule was itself the bottleneck.
    maxBehind,
    histograms: tally.histograms.map((h) => hdr.encodeIntoCompressedBase64(h)),
    expired: tally.expired,
    late: tally.late,
    byPriority: tally.counts,
    bridges,
    statusRefused,
  };
}

port.on('message', (message: WorkerMessage) => {
  void (async () => {
    switch (message.type) {
      case 'connect': {
        mixPattern = buildMixPattern(init.mix);
        const ids = init.devices;
        const connected: Device[] = [];
        // A few connects in flight at once: a stampede of CONNECTs measures nothing useful.
        for (let i = 0; i < ids.length; i += 50) {
          connected.push(...(await Promise.all(ids.slice(i, i + 50).map((spec, j) => connectDevice(spec, i + j === 0 && init.watchStatus)))));
        }
        devices = connected;
        port.postMessage({ type: 'connected', devices: devices.length } satisfies WorkerReply);
        return;
      }
      case 'step':
        port.postMessage({ type: 'step', report: await runStep(message.step) } satisfies WorkerReply);
        return;
      case 'drain': {
        // What an overloaded system still owes from earlier steps must not slow the next one.
        // Replies owed by connections the broker dropped never come: stop once nothing moves.
        const until = performance.now() + message.maxMs;
        let last = pendingCount;
        let lastMove = performance.now();
        while (pendingCount > 0 && performance.now() < until && performance.now() - lastMove < message.stallMs) {
          await sleep(50);
          if (pendingCount !== last) {
            last = pendingCount;
            lastMove = performance.now();
          }
        }
        port.postMessage({ type: 'drained', pending: pendingCount } satisfies WorkerReply);
        return;
      }
      case 'close':
        closing = true;
        for (const d of devices) d.socket.end(mqttPacket.generate({ cmd: 'disconnect' }));
        await Promise.all(devices.map((d) => new Promise((resolve) => (d.socket.closed ? resolve(null) : d.socket.once('close', resolve)))));
        port.postMessage({ type: 'closed' } satisfies WorkerReply);
        return;
    }
  })().catch((err: unknown) => port.postMessage({ type: 'error', message: err instanceof Error ? err.message : String(err) } satisfies WorkerReply));
});
