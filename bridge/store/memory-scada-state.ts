// ScadaState for one process (no REDIS_URL): a Map in recency order, counters and a lease in
// memory, events delivered to this process's listeners.
import type { ScadaAnswer } from '../../contract/index.js';
import type { ScadaEvent, ScadaState, ScadaStateBounds } from './scada-state.js';

interface Kept {
  answer: ScadaAnswer;
  expiresAt: number;
}

export class MemoryScadaState implements ScadaState {
  /** Insertion order is recency order: a kept answer is deleted and set again. */
  private readonly good = new Map<string, Kept>();
  private readonly bdSeqs = new Map<string, number>();
  private readonly leases = new Map<string, { owner: string; until: number }>();
  private readonly sessions = new Map<string, number>();
  private readonly listeners = new Set<(event: ScadaEvent) => void>();

  constructor(
    private readonly bounds: ScadaStateBounds,
    private readonly clock: () => number = Date.now,
  ) {}

  async keepGood(answer: ScadaAnswer): Promise<void> {
    if (Buffer.byteLength(JSON.stringify(answer)) > this.bounds.maxRecordBytes) return;
    const key = keyOf(answer.deviceId, answer.template);
    this.good.delete(key);
    this.good.set(key, { answer, expiresAt: this.clock() + this.bounds.ttlS * 1000 });
    while (this.good.size > this.bounds.maxEntries) this.good.delete(this.good.keys().next().value as string);
  }

  async lastGood(deviceId: string, template: string): Promise<ScadaAnswer | undefined> {
    const key = keyOf(deviceId, template);
    const kept = this.good.get(key);
    if (kept === undefined) return undefined;
    if (kept.expiresAt <= this.clock()) {
      this.good.delete(key);
      return undefined;
    }
    return kept.answer;
  }

  async allGood(limit: number): Promise<ScadaAnswer[]> {
    const now = this.clock();
    const out: ScadaAnswer[] = [];
    for (const [key, kept] of [...this.good].reverse()) {
      if (kept.expiresAt <= now) this.good.delete(key);
      else if (out.length < limit) out.push(kept.answer);
    }
    return out;
  }

  async nextBdSeq(node: string): Promise<number> {
    const next = ((this.bdSeqs.get(node) ?? -1) + 1) % 256;
    this.bdSeqs.set(node, next);
    return next;
  }

  async holdLease(node: string, owner: string, ttlMs: number): Promise<boolean> {
    const now = this.clock();
    const lease = this.leases.get(node);
    if (lease !== undefined && lease.owner !== owner && lease.until > now) return false;
    this.leases.set(node, { owner, until: now + ttlMs });
    return true;
  }

  async releaseLease(node: string, owner: string): Promise<void> {
    if (this.leases.get(node)?.owner === owner) this.leases.delete(node);
  }

  async openSession(node: string): Promise<number | undefined> {
    return this.sessions.get(node);
  }

  async setOpenSession(node: string, bdSeq: number | undefined): Promise<void> {
    if (bdSeq === undefined) this.sessions.delete(node);
    else this.sessions.set(node, bdSeq);
  }

  async announce(event: ScadaEvent): Promise<void> {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure is its own (it logs); the others still get the event.
      }
    }
  }

  async onAnnounce(listener: (event: ScadaEvent) => void): Promise<() => Promise<void>> {
    this.listeners.add(listener);
    return async () => {
      this.listeners.delete(listener);
    };
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }
}

const keyOf = (deviceId: string, template: string): string => `${deviceId}\n${template}`;
