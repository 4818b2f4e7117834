// The Edge Node's devices and their metrics: for each template a device used, its output
// fields (`AI/{template}/{field}`, typed by the template's output schema) and its quality,
// requestId and latencyMs. Every metric gets an alias unique across the node, declared in the
// DBIRTH and used alone in DDATA.
import { SPARKPLUG_TYPE_OF, sparkplugMetricName, type ScadaAnswer, type TypedValue } from '../../../contract/index.js';
import type { OutputField } from '../../config/output.js';

export type MetricType = 'Boolean' | 'Double' | 'Int64' | 'String';

export interface Metric {
  readonly name: string;
  readonly alias: number;
  readonly type: MetricType;
  /** Null until the first good answer sets a field (births then carry is_null). */
  value: TypedValue | null;
  timestamp: number;
}

export interface DeviceMetrics {
  readonly deviceId: string;
  readonly metrics: Map<string, Metric>;
  /** Its DBIRTH is out in the current session (and no DDEATH since). */
  born: boolean;
  /** Its DDEATH is out (disconnected or idle): births leave it out until it answers again. */
  dead: boolean;
  /** When its last answer reached this instance (the idle DDEATH). */
  lastAnswerAt: number;
}

/** A template's output fields as this instance's configuration declares them. */
export type FieldsOf = (template: string) => readonly OutputField[] | undefined;

/** What an answer changed: the device needs a (new) DBIRTH, or a DDATA of `changed`. */
export interface Applied {
  device: DeviceMetrics;
  birth: boolean;
  changed: Metric[];
}

/** Bounds of the in-process model (a device is never dropped while answering). */
export const MAX_DEVICES = 10_000;
export const MAX_METRICS_PER_DEVICE = 1024;

export class NodeModel {
  private readonly devices = new Map<string, DeviceMetrics>();
  private nextAlias = 1;

  constructor(private readonly fieldsOf: FieldsOf) {}

  all(): DeviceMetrics[] {
    return [...this.devices.values()];
  }

  get(deviceId: string): DeviceMetrics | undefined {
    return this.devices.get(deviceId);
  }

  /** Every device unborn: a new session (NBIRTH) births them again. */
  unbornAll(): void {
    for (const device of this.devices.values()) device.born = false;
  }

  /** Applies an answer (good: fields and quality; bad: quality only, fields keep their last good). Undefined when over the bounds. */
  apply(answer: ScadaAnswer): Applied | undefined {
    const device = this.deviceOf(answer.deviceId);
    if (!device) return undefined;
    let added = false;
    const changed: Metric[] = [];
    for (const [name, type, value] of this.valuesOf(answer)) {
      let metric = device.metrics.get(name);
      if (!metric) {
        if (device.metrics.size >= MAX_METRICS_PER_DEVICE) continue;
        metric = { name, alias: this.nextAlias++, type, value: null, timestamp: answer.timestamp };
        device.metrics.set(name, metric);
        added = true;
      }
      if (value === undefined || !fits(metric.type, value)) continue;
      if (metric.value !== value) changed.push(metric);
      metric.value = value;
      metric.timestamp = answer.timestamp;
    }
    return { device, birth: added || !device.born, changed };
  }

  private deviceOf(deviceId: string): DeviceMetrics | undefined {
    const known = this.devices.get(deviceId);
    if (known) return known;
    if (this.devices.size >= MAX_DEVICES) return undefined;
    const device: DeviceMetrics = { deviceId, metrics: new Map(), born: false, dead: false, lastAnswerAt: 0 };
    this.devices.set(deviceId, device);
    return device;
  }

  /** [metric name, type, value or undefined (declared, left as it is)] for one answer. */
  private valuesOf(answer: ScadaAnswer): Array<[string, MetricType, TypedValue | undefined]> {
    const { template, data } = answer;
    const good = answer.quality === 'good';
    const fields = this.fieldsOf(template) ?? inferredFields(data);
    const out: Array<[string, MetricType, TypedValue | undefined]> = fields.map((f) => [
      sparkplugMetricName(template, f.name),
      SPARKPLUG_TYPE_OF[f.type],
      good ? data?.[f.name] : undefined,
    ]);
    out.push([sparkplugMetricName(template, 'quality'), 'String', answer.quality]);
    out.push([sparkplugMetricName(template, 'requestId'), 'String', answer.requestId]);
    out.push([sparkplugMetricName(template, 'latencyMs'), 'Int64', answer.latencyMs]);
    return out;
  }
}

/** A template this instance does not know: types from the values (a number is a Double). */
function inferredFields(data: ScadaAnswer['data']): OutputField[] {
  return Object.entries(data ?? {}).map(([name, value]) => ({
    name,
    type: typeof value === 'boolean' ? 'boolean' : typeof value === 'string' ? 'string' : 'number',
  }));
}

function fits(type: MetricType, value: TypedValue): boolean {
  if (type === 'Boolean') return typeof value === 'boolean';
  if (type === 'String') return typeof value === 'string';
  if (type === 'Int64') return Number.isSafeInteger(value);
  return typeof value === 'number' && Number.isFinite(value);
}
