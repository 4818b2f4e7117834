// The bridge's overload refusals by reason, read from its /metrics, so each step can report
// what was shed beside what failed.
import type { ServiceProcess } from '../../device-sim/service-process.js';

/** `edge_ai_bridge_shed_total` of every instance, summed by reason. */
export async function shedCounts(services: ServiceProcess[]): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const service of services) {
    const text = await (await fetch(`http://127.0.0.1:${service.httpPort}/metrics`)).text();
    for (const [, labels = '', value] of text.matchAll(/^edge_ai_bridge_shed_total\{([^}]*)\} (\d+)$/gm)) {
      const reason = /reason="([^"]+)"/.exec(labels)?.[1] ?? 'unknown';
      counts[reason] = (counts[reason] ?? 0) + Number(value);
    }
  }
  return counts;
}

/** What each count grew by since `before`, leaving out those that did not. */
export function countsSince(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after)
      .map(([k, v]) => [k, v - (before[k] ?? 0)])
      .filter(([, n]) => n !== 0),
  );
}
