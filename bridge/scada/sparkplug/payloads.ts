// Sparkplug B payloads, encoded by sparkplug-payload (Eclipse Tahu's codec), never by hand.
import { createRequire } from 'node:module';
import { REBIRTH_METRIC } from '../../../contract/index.js';
import type { Metric } from './model.js';

type Codec = typeof import('sparkplug-payload/lib/sparkplugbpayload.js');
type UPayload = Parameters<Codec['encodePayload']>[0];
type UMetric = NonNullable<UPayload['metrics']>[number];

// Loaded on first use: most deployments never turn Sparkplug on, and a restart (the takeover
// after a crash) should not wait for a codec it does not need.
let loaded: Codec | undefined;
function codec(): Codec {
  loaded ??= (createRequire(import.meta.url)('sparkplug-payload') as { get(ns: string): Codec | null }).get('spBv1.0') as Codec;
  return loaded;
}

export const BDSEQ_METRIC = 'bdSeq';

const encode = (payload: UPayload): Buffer => Buffer.from(codec().encodePayload(payload));

export function decodePayload(buf: Uint8Array): UPayload {
  return codec().decodePayload(buf);
}

const bdSeqMetric = (bdSeq: number, timestamp: number): UMetric => ({ name: BDSEQ_METRIC, type: 'Int64', value: bdSeq, timestamp });

/** NBIRTH: seq 0, the session's bdSeq and the rebirth control. */
export function nbirth(bdSeq: number, timestamp: number): Buffer {
  return encode({
    timestamp,
    seq: 0,
    metrics: [bdSeqMetric(bdSeq, timestamp), { name: REBIRTH_METRIC, type: 'Boolean', value: false, timestamp }],
  });
}

/** NDEATH (the Will, or published on a clean stop): the bdSeq of the session it ends, no seq. */
export function ndeath(bdSeq: number, timestamp: number): Buffer {
  return encode({ timestamp, metrics: [bdSeqMetric(bdSeq, timestamp)] });
}

/** DBIRTH: every metric of the device with its name, alias, type and current value. */
export function dbirth(seq: number, metrics: Iterable<Metric>, timestamp: number): Buffer {
  const all: UMetric[] = [];
  for (const m of metrics) {
    all.push(
      m.value === null
        ? { name: m.name, alias: m.alias, type: m.type, value: null, isNull: true, timestamp: m.timestamp }
        : { name: m.name, alias: m.alias, type: m.type, value: m.value, timestamp: m.timestamp },
    );
  }
  return encode({ timestamp, seq, metrics: all });
}

/** DDATA: changed metrics by alias alone (the name was declared in the DBIRTH). */
export function ddata(seq: number, metrics: Metric[], timestamp: number): Buffer {
  return encode({ timestamp, seq, metrics: metrics.map((m) => ({ alias: m.alias, type: m.type, value: m.value, timestamp: m.timestamp })) });
}

export function ddeath(seq: number, timestamp: number): Buffer {
  return encode({ timestamp, seq });
}

/** True when an NCMD payload writes `true` to Node Control/Rebirth (by name; the node gives it no alias). */
export function asksRebirth(payload: Buffer): boolean {
  let decoded: UPayload;
  try {
    decoded = codec().decodePayload(payload);
  } catch {
    return false;
  }
  return (decoded.metrics ?? []).some((m) => m.name === REBIRTH_METRIC && m.value === true);
}
