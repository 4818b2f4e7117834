// The hot path's metrics (ops/metrics/fast.ts) must read exactly as prom-client's own would.
import { describe, expect, it } from 'vitest';
import { Counter, Histogram, Registry } from 'prom-client';
import { BucketHistogram, Tallies } from '../../bridge/ops/metrics/fast.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const VALUES = [0, 0.0005, 0.001, 0.002, 0.5, 1, 3, 120, -1, 0.01];

describe('BucketHistogram', () => {
  it('exposes what a prom-client Histogram exposes for the same observations', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const fast = new BucketHistogram({ name: 'h_seconds', help: 'help "text"\\', labelNames: ['priority'], buckets: BUCKETS, registers: [ours] });
    const slow = new Histogram({ name: 'h_seconds', help: 'help "text"\\', labelNames: ['priority'] as const, buckets: BUCKETS, registers: [theirs] });
    const plainFast = new BucketHistogram({ name: 'plain_seconds', help: 'no labels', labelNames: [], buckets: BUCKETS, registers: [ours] });
    const plainSlow = new Histogram({ name: 'plain_seconds', help: 'no labels', buckets: BUCKETS, registers: [theirs] });
    // Before any observation: labelled series absent, the plain one at zero.
    expect(await ours.metrics()).toBe(await theirs.metrics());
    const fastHigh = fast.labels('high');
    const slowHigh = slow.labels('high');
    VALUES.forEach((v, i) => {
      fastHigh.observe(v);
      slowHigh.observe(v);
      if (i % 3 === 0) {
        fast.labels('low "x"').observe(v * 2);
        slow.labels('low "x"').observe(v * 2);
      }
      plainFast.observe(v);
      plainSlow.observe(v);
    });
    expect(await ours.metrics()).toBe(await theirs.metrics());
    fast.reset();
    slow.reset();
    plainFast.reset();
    plainSlow.reset();
    fastHigh.observe(0.3);
    slowHigh.observe(0.3);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(() => fastHigh.observe(NaN)).toThrow(TypeError);
  });
});

describe('Tallies', () => {
  it('reach the counter when it is read', async () => {
    const registry = new Registry();
    const tallies: Tallies<'model' | 'kind'> = new Tallies(() => counter);
    const counter = new Counter({ name: 't_total', help: 'h', labelNames: ['model', 'kind'] as const, registers: [registry], collect: () => tallies.flush() });
    const prompt = tallies.of('m', 'prompt');
    tallies.of('m', 'completion'); // never incremented: no series
    prompt.inc(3);
    prompt.inc();
    expect(await registry.metrics()).toBe('# HELP t_total h\n# TYPE t_total counter\nt_total{model="m",kind="prompt"} 4\n');
    prompt.inc(0.5);
    expect(await registry.metrics()).toContain('t_total{model="m",kind="prompt"} 4.5\n');
  });
});
