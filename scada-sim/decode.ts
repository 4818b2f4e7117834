// Sparkplug B payloads decoded from the protobuf itself rather than through the codec's
// object form: a DATA message may leave out a metric's datatype (Sparkplug 3.0 recommends
// it), and the codec then loses the value. The value's own field says what it holds.
import { createRequire } from 'node:module';
import type { org } from 'sparkplug-payload/lib/sparkplugPayloadProto.js';

type ProtoPayload = org.eclipse.tahu.protobuf.Payload;
type ProtoMetric = org.eclipse.tahu.protobuf.Payload.IMetric & { value?: string };

const require = createRequire(import.meta.url);
const proto = require('sparkplug-payload/lib/sparkplugPayloadProto.js') as { org: typeof org };
const Payload = proto.org.eclipse.tahu.protobuf.Payload;

/** Sparkplug B datatype numbers → names (the spec's table; arrays from 22 on). */
const TYPE_NAMES = [
  'Unknown',
  'Int8',
  'Int16',
  'Int32',
  'Int64',
  'UInt8',
  'UInt16',
  'UInt32',
  'UInt64',
  'Float',
  'Double',
  'Boolean',
  'String',
  'DateTime',
  'Text',
  'UUID',
  'DataSet',
  'Bytes',
  'File',
  'Template',
  'PropertySet',
  'PropertySetList',
  'Int8Array',
  'Int16Array',
  'Int32Array',
  'Int64Array',
  'UInt8Array',
  'UInt16Array',
  'UInt32Array',
  'UInt64Array',
  'FloatArray',
  'DoubleArray',
  'BooleanArray',
  'StringArray',
  'DateTimeArray',
];

/** A shown string value is cut here: the table is for reading, not a store of device text. */
export const MAX_SHOWN_STRING = 200;

export type MetricValue = boolean | number | string | null;

export interface DecodedMetric {
  name?: string;
  alias?: number;
  /** The datatype's name; undefined when the message left it out. */
  type?: string;
  value: MetricValue;
  timestamp?: number;
}

export interface DecodedPayload {
  timestamp?: number;
  seq?: number;
  metrics: DecodedMetric[];
}

const has = (object: object, key: string): boolean => Object.prototype.hasOwnProperty.call(object, key);

interface LongLike {
  toNumber(): number;
  toString(): string;
  toSigned(): LongLike;
}
const isLong = (v: unknown): v is LongLike => typeof v === 'object' && v !== null && 'toNumber' in v;

/** A 64-bit integer as a number when it is exact, else as its decimal string. */
function longValue(raw: unknown, signed: boolean): number | string {
  if (!isLong(raw)) return Number(raw);
  const long = signed ? raw.toSigned() : raw;
  const n = long.toNumber();
  return Number.isSafeInteger(n) ? n : long.toString();
}

const toNumber = (raw: unknown): number => (isLong(raw) ? raw.toNumber() : Number(raw));

// Long: one case per field of the value's oneof, each converted for display.
function valueOf(metric: ProtoMetric, type: string | undefined): MetricValue {
  if (metric.isNull === true) return null;
  switch (metric.value) {
    case 'intValue': {
      const n = Number(metric.intValue);
      // Int8/16/32 travel as uint32: the two's complement gives the sign back.
      return type === 'Int8' || type === 'Int16' || type === 'Int32' ? n | 0 : n;
    }
    case 'longValue':
      return longValue(metric.longValue, type === 'Int64');
    case 'floatValue':
      return Number(metric.floatValue);
    case 'doubleValue':
      return Number(metric.doubleValue);
    case 'booleanValue':
      return metric.booleanValue === true;
    case 'stringValue':
      return String(metric.stringValue).slice(0, MAX_SHOWN_STRING);
    case 'bytesValue':
      return `<${metric.bytesValue?.length ?? 0} bytes>`;
    case 'datasetValue':
      return '<DataSet>';
    case 'templateValue':
      return '<Template>';
    default:
      return null;
  }
}

function metricOf(raw: ProtoMetric): DecodedMetric {
  const type = has(raw, 'datatype') && raw.datatype ? (TYPE_NAMES[raw.datatype] ?? `Type${raw.datatype}`) : undefined;
  const metric: DecodedMetric = { value: valueOf(raw, type) };
  if (has(raw, 'name') && typeof raw.name === 'string') metric.name = raw.name;
  if (has(raw, 'alias')) metric.alias = toNumber(raw.alias);
  if (type !== undefined) metric.type = type;
  if (has(raw, 'timestamp')) metric.timestamp = toNumber(raw.timestamp);
  return metric;
}

/**
 * A value decoded without its datatype (a DATA metric that left it out), read again with the
 * birth's: Int8/16/32 travel as uint32 and Int64 as uint64, so the sign comes back here.
 */
export function withBirthType(value: MetricValue, type: string): MetricValue {
  if (typeof value === 'number' && (type === 'Int8' || type === 'Int16' || type === 'Int32')) return value | 0;
  // A negative Int64 read as uint64 is past 2^53, so it arrives here as its decimal string.
  if (type !== 'Int64' || typeof value !== 'string' || !/^\d{1,20}$/.test(value)) return value;
  const signed = BigInt.asIntN(64, BigInt(value));
  return Number.isSafeInteger(Number(signed)) ? Number(signed) : String(signed);
}

/** Decodes a Sparkplug B payload; throws on bytes that are not one. */
export function decodeSparkplug(bytes: Uint8Array): DecodedPayload {
  const raw: ProtoPayload = Payload.decode(bytes);
  const payload: DecodedPayload = { metrics: (raw.metrics ?? []).map((m) => metricOf(m as ProtoMetric)) };
  if (has(raw, 'timestamp')) payload.timestamp = toNumber(raw.timestamp);
  if (has(raw, 'seq')) payload.seq = toNumber(raw.seq);
  return payload;
}
