// One budget's share of a request, carried by its job from admission (reserved) to its end
// (settled with what it really used).
/** One budget's share of a request: reserved at admission, settled when it ends. */
export interface BudgetCharge {
  /** The budget's name. */
  budget: string;
  /** The period's label (`2026-12-02`, `2026-12`), part of where its use is kept. */
  period: string;
  /** The device for a per-device budget, else `*`. */
  subject: string;
  unit: 'tokens' | 'usd';
  limit: number;
  /** What was reserved. */
  estimate: number;
  /** `critical` and exempted: counted, never refused. */
  exempt: boolean;
  /** When the period ends (the next midnight, or the first of the next month, in the time zone). */
  resetAtMs: number;
}
