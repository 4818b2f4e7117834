// The memory store's dead letters: entries in index-member order (the same order as Redis's),
// a map by job key for lookups, and their total stored size, kept within DLQ_MAX,
// DLQ_MAX_BYTES (oldest dropped and counted) and DLQ_TTL_S.
import { DEAD_LETTER_PAGE_BYTES, memberOf, oldestKept, replayInPages, storedEntry, toCursor, fromCursor, type ReplayOffsets } from './dead-letters.js';
import type { DeadLetter, DeadLetterBounds, DeadLetterPage, DeadLetters } from './port.js';
import type { Job } from '../model/job.js';
import { replayedJob } from '../model/job.js';

interface Kept {
  member: string;
  letter: DeadLetter;
  bytes: number;
}

export class MemoryDeadLetters implements DeadLetters {
  /** Sorted by member: oldest first. */
  private readonly order: Kept[] = [];
  private readonly byKey = new Map<string, Kept>();
  private bytes = 0;
  private droppedCount = 0;

  constructor(
    private readonly bounds: DeadLetterBounds,
    /** Puts a replayed job back in the queue as pending. */
    private readonly requeue: (job: Job) => void,
  ) {}

  /** Keeps `letter` (replacing an entry of the same job), then drops the oldest until within the bounds. */
  add(letter: DeadLetter, now: number): void {
    const earlier = this.byKey.get(letter.job.key);
    if (earlier) this.remove(earlier);
    this.expire(now);
    const kept: Kept = { member: memberOf(letter.atMs, letter.job.key), letter, bytes: Buffer.byteLength(storedEntry(letter)) };
    if (kept.bytes > this.bounds.maxBytes) {
      this.droppedCount += 1;
      return;
    }
    this.order.splice(this.after(kept.member, true), 0, kept);
    this.byKey.set(letter.job.key, kept);
    this.bytes += kept.bytes;
    while (this.order.length > this.bounds.max || this.bytes > this.bounds.maxBytes) {
      this.remove(this.order[0] as Kept);
      this.droppedCount += 1;
    }
  }

  async page(limit: number, after: string | undefined, now: number): Promise<DeadLetterPage> {
    this.expire(now);
    const from = after === undefined ? undefined : fromCursor(after);
    if (after !== undefined && from === undefined) throw new RangeError('not a dead-letter cursor');
    let i = from === undefined ? 0 : this.after(from, false);
    const entries: DeadLetter[] = [];
    let budget = DEAD_LETTER_PAGE_BYTES;
    for (; i < this.order.length && entries.length < limit; i += 1) {
      const kept = this.order[i] as Kept;
      if (entries.length > 0 && kept.bytes > budget) break;
      budget -= kept.bytes;
      entries.push(kept.letter);
    }
    const last = this.order[i - 1];
    return { entries, next: i < this.order.length && last ? toCursor(last.member) : undefined };
  }

  async get(key: string, now: number): Promise<DeadLetter | undefined> {
    this.expire(now);
    return this.byKey.get(key)?.letter;
  }

  async stats(now: number): Promise<{ count: number; bytes: number }> {
    this.expire(now);
    return { count: this.order.length, bytes: this.bytes };
  }

  async replay(keys: string[], offsetsMs: ReplayOffsets, now: number): Promise<number> {
    this.expire(now);
    const letters = keys.flatMap((key) => this.byKey.get(key)?.letter ?? []);
    return this.replayLetters(letters, offsetsMs, now);
  }

  replayAll(offsetsMs: ReplayOffsets, now: number): Promise<number> {
    return replayInPages(this, async (entries) => this.replayLetters(entries, offsetsMs, now), now);
  }

  async purge(): Promise<number> {
    const count = this.order.length;
    this.order.length = 0;
    this.byKey.clear();
    this.bytes = 0;
    return count;
  }

  dropped(): number {
    return this.droppedCount;
  }

  private replayLetters(letters: DeadLetter[], offsetsMs: ReplayOffsets, now: number): number {
    let replayed = 0;
    for (const letter of letters) {
      const kept = this.byKey.get(letter.job.key);
      if (kept?.letter !== letter) continue;
      this.remove(kept);
      this.requeue(replayedJob(letter.job, offsetsMs, now));
      replayed += 1;
    }
    return replayed;
  }

  /** Entries past DLQ_TTL_S go (not counted as dropped: they aged out). */
  private expire(now: number): void {
    const oldest = oldestKept(this.bounds, now);
    while (this.order.length > 0 && (this.order[0] as Kept).member < oldest) this.remove(this.order[0] as Kept);
  }

  private remove(kept: Kept): void {
    const at = this.after(kept.member, true);
    if (this.order[at] === kept) this.order.splice(at, 1);
    this.byKey.delete(kept.letter.job.key);
    this.bytes -= kept.bytes;
  }

  /** The index of the first entry whose member is above `member` (or, `inclusive`, at or above it). */
  private after(member: string, inclusive: boolean): number {
    let lo = 0;
    let hi = this.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const m = (this.order[mid] as Kept).member;
      if (m < member || (!inclusive && m === member)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
