// What the upstream simulator counts, served by GET /stats.

export interface SimStats {
  /** Every HTTP call except GET /stats itself. */
  total: number;
  /** By HTTP status as a string; `hang` for calls never answered. */
  byStatus: Record<string, number>;
  byPath: Record<string, number>;
  /** Chat/embeddings calls by requested model (`sim-model` when none). */
  byModel: Record<string, number>;
  /** By API key, identified by its last 4 characters only (`…abcd`); `none` without a key. */
  byKey: Record<string, number>;
  /** Calls currently hanging. */
  hanging: number;
}

export function emptyStats(): SimStats {
  return { total: 0, byStatus: {}, byPath: {}, byModel: {}, byKey: {}, hanging: 0 };
}

export function bump(record: Record<string, number>, key: string): void {
  record[key] = (record[key] ?? 0) + 1;
}
