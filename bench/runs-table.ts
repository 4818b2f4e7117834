// Several runs' figures summed up as one Markdown table of "median (min–max)" cells, for the
// benches that repeat a measurement on a shared machine and report its spread.

/** The q-quantile of `xs` (NaN when empty). */
export function pct(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.min(s.length - 1, Math.floor(s.length * q))] as number);
}

function median(sorted: number[]): number {
  const mid = sorted.length / 2;
  return sorted.length % 2 === 1 ? (sorted[Math.floor(mid)] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** How one row's values are written: `count` rows as whole numbers, the others with one decimal and `unit`. */
export interface RowFormat {
  count: boolean;
  unit: string;
}

/** `values` over the runs as "median (min–max)", or "—" when there are none. */
export function spreadCell(values: number[], { count, unit }: RowFormat): string {
  const s = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (s.length === 0) return '—';
  const fmt = (v: number): string => (count ? String(Math.round(v)) : v.toFixed(1));
  const [lo, hi] = [fmt(s[0] as number), fmt(s[s.length - 1] as number)];
  const spread = lo === hi ? '' : ` (${lo}–${hi})`;
  return `${fmt(median(s))}${count ? '' : unit}${spread}`;
}

/**
 * One row per figure, one column per `columns` entry: `runs` holds, per run, each column's
 * figures by row name (the first run's rows, in order, make the table).
 */
export function runsTable(columns: string[], runs: Array<Map<string, Record<string, number>>>, formatOf: (row: string) => RowFormat): string {
  const rows = Object.keys(runs[0]?.get(columns[0] as string) ?? {});
  const head = `| median (min–max) of ${runs.length} run${runs.length === 1 ? '' : 's'} | ${columns.join(' | ')} |`;
  const lines = [head, `| --- |${columns.map(() => ' ---: |').join('')}`];
  for (const row of rows) {
    const cells = columns.map((c) =>
      spreadCell(
        runs.map((m) => m.get(c)?.[row] ?? NaN),
        formatOf(row),
      ),
    );
    lines.push(`| ${row} | ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}
