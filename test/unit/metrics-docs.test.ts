// docs/operations.md lists exactly the metrics the bridge registers, each with its type and
// labels, as docs.test.ts does for the configuration table.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BridgeMetrics, type MetricsSources } from '../../bridge/ops/metrics/bridge-metrics.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Every source set, optional ones too, so every metric the bridge may register is there. */
const sources: MetricsSources = {
  queueDepth: () => Promise.resolve({ critical: 0, high: 0, normal: 0, low: 0 }),
  inFlight: () => 0,
  providers: () => [{ name: 'primary', circuit: 'closed' }],
  connectedClients: () => 0,
  refusals: () => ({ publish: 0, subscribe: 0, connect: 0, slow: { backlog: 0, drain_timeout: 0 } }),
  sessions: () => undefined,
  deadLettersDropped: () => 0,
  scada: () => undefined,
  budgets: () => Promise.resolve({ timeZone: 'UTC', budgets: [] }),
};

interface Documented {
  type: string;
  labels: string[];
}

/** The rows of the table under `| metric | type | labels | meaning |`. */
function documentedMetrics(): Map<string, Documented> {
  const lines = readFileSync(resolve(ROOT, 'docs/operations.md'), 'utf8').split('\n');
  const start = lines.findIndex((l) => l.startsWith('| metric | type | labels | meaning |'));
  expect(start, 'a metrics table in docs/operations.md').toBeGreaterThanOrEqual(0);
  const rows = new Map<string, Documented>();
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [name, type, labels] = line
      .split('|')
      .slice(1)
      .map((cell) => cell.trim());
    // Label values are named in parentheses after their label: drop them, keep the labels.
    let bare = labels ?? '';
    while (/\([^()]*\)/.test(bare)) bare = bare.replace(/\([^()]*\)/g, '');
    rows.set((name ?? '').replace(/`/g, ''), { type: type ?? '', labels: [...bare.matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string).sort() });
  }
  return rows;
}

describe('docs/operations.md metrics table', () => {
  it('lists every metric the bridge registers, with its type and labels, and no other', async () => {
    const metrics = new BridgeMetrics(sources);
    const registered = new Map<string, Documented>();
    for (const metric of await metrics.registry.getMetricsAsJSON()) {
      if (!metric.name.startsWith('edge_ai_bridge_')) continue; // prom-client's process_* and nodejs_*
      const labelNames = (metrics.registry.getSingleMetric(metric.name) as unknown as { labelNames: string[] }).labelNames;
      registered.set(metric.name, { type: String(metric.type), labels: [...labelNames].sort() });
    }
    const documented = documentedMetrics();
    expect([...documented.keys()].sort()).toEqual([...registered.keys()].sort());
    for (const [name, shape] of registered) expect(documented.get(name), name).toEqual(shape);
  });
});
