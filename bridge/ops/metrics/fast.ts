// What the hot path observes through, cheaper than prom-client's own children: a bound counter
// child or a histogram observation there hashes its labels, checks them and allocates several
// objects each time (about 1 % of the bridge's CPU per request). Here a counter's increments
// are added up and handed to prom-client when it is read, and the histograms keep their
// buckets in arrays, exposed in exactly the form prom-client's Histogram gives the registry.
import type { Counter, Metric, Registry } from 'prom-client';
import type { Child, HistogramChild } from './common.js';

/** A counter child whose increments reach prom-client when the counter is read. */
export class Tally implements Child {
  private pending = 0;

  constructor(private readonly child: Child) {}

  inc(value = 1): void {
    this.pending += value;
  }

  /** Called from the counter's `collect`, before its values are read. */
  flush(): void {
    if (this.pending === 0) return;
    const value = this.pending;
    this.pending = 0;
    this.child.inc(value);
  }
}

/** A Tally per label values of `counter`, made on first use and flushed on every read. */
export class Tallies<L extends string> {
  private readonly all: Tally[] = [];

  constructor(private readonly counter: () => Counter<L>) {}

  of(...values: string[]): Tally {
    const tally = new Tally(this.counter().labels(...values));
    this.all.push(tally);
    return tally;
  }

  /** For the counter's `collect`. */
  flush(): void {
    for (const tally of this.all) tally.flush();
  }
}

interface Series {
  labels: Record<string, string>;
  /** Per bucket, not cumulative (as prom-client keeps them). */
  counts: number[];
  sum: number;
  count: number;
}

interface Value {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
}

/** A histogram as prom-client's Histogram shows it to the registry, without its per-observation cost. */
export class BucketHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private series = new Map<string, Series>();

  readonly name: string;
  readonly help: string;
  private readonly labelNames: readonly string[];
  private readonly bounds: readonly number[];

  /** prom-client's Histogram options, the ones this uses. */
  constructor(options: { name: string; help: string; labelNames: readonly string[]; buckets: readonly number[]; registers: Registry[] }) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.bounds = options.buckets;
    // As prom-client does: a histogram without labels shows its zero series from the start.
    if (this.labelNames.length === 0) this.seriesOf('', []);
    for (const registry of options.registers) registry.registerMetric(this as unknown as Metric);
  }

  /** A child for these label values; its series appears at its first observation (and again after a reset). */
  labels(...values: string[]): HistogramChild {
    const key = values.join('\u0000');
    return { observe: (value) => this.add(this.seriesOf(key, values), value) };
  }

  observe(value: number): void {
    this.add(this.seriesOf('', []), value);
  }

  /** As Histogram.reset: every series gone, the plain one too until its next observation. */
  reset(): void {
    this.series = new Map();
  }

  /** The registry's text exposition reads this (as Histogram.getForPromString). */
  async getForPromString(): Promise<{ name: string; help: string; type: string; values: Value[]; aggregator: string }> {
    const values: Value[] = [];
    for (const series of this.series.values()) {
      let cumulative = 0;
      const shared = series.labels;
      this.bounds.forEach((le, i) => {
        cumulative += series.counts[i] as number;
        values.push({ labels: { le }, sharedLabels: shared, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels: shared, value: series.count, metricName: `${this.name}_bucket` });
      values.push({ labels: {}, sharedLabels: shared, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: shared, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** JSON (Registry.getMetricsAsJSON): the shared labels merged into each value's, as Histogram.get. */
  async get(): Promise<{ name: string; help: string; type: string; values: Array<Omit<Value, 'sharedLabels'>>; aggregator: string }> {
    const data = await this.getForPromString();
    const values = data.values.map(({ labels, sharedLabels, value, metricName }) => ({ labels: { ...labels, ...sharedLabels }, value, metricName }));
    return { ...data, values };
  }

  private seriesOf(key: string, values: readonly string[]): Series {
    let series = this.series.get(key);
    if (!series) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i] as string));
      series = { labels, counts: this.bounds.map(() => 0), sum: 0, count: 0 };
      this.series.set(key, series);
    }
    return series;
  }

  private add(series: Series, value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const { bounds } = this;
    const { counts } = series;
    for (let i = 0; i < bounds.length; i += 1) {
      if (value <= (bounds[i] as number)) {
        counts[i] = (counts[i] as number) + 1;
        break;
      }
    }
    series.sum += value;
    series.count += 1;
  }
}
