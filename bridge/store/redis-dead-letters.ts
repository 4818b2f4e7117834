// The dead letters on Redis (lua/includes/dead-letters.lua): an index of members ordered by
// time, a hash of entries by job key and a byte counter, so a page, a lookup, a new entry and
// dropping the oldest each cost O(log n) or O(page), and no reader loads the whole list.
// complete.lua adds entries (deadLetterArg); this class reads, replays, purges and upgrades.
import type { Redis } from 'ioredis';
import type { Reply } from '../../contract/index.js';
import {
  DEAD_LETTER_PAGE_BYTES,
  fromCursor,
  oldestKept,
  parseStored,
  replayInPages,
  storedEntry,
  timeField,
  toCursor,
  type ReplayOffsets,
} from './dead-letters.js';
import type { LuaArg } from './lua-library.js';
import { lockId, type RedisKeys } from './redis-keys.js';
import type { DeadLetter, DeadLetterBounds, DeadLetterPage, DeadLetters } from './port.js';
import type { ExpiredJob, Job } from '../model/job.js';
import { replayedJob, withoutImageBytes } from '../model/job.js';

/** The steps of this file (lua/<name>.lua). */
export type DeadLetterStep = 'dlq-page' | 'dlq-stats' | 'dlq-upgrade' | 'replay';
type Run = (step: DeadLetterStep, keys: string[], args: LuaArg[]) => Promise<unknown>;
type Guard = <T>(pending: Promise<T>) => Promise<T>;

/** Entries of 0.7's list moved per upgrade step. */
const UPGRADE_BATCH = 100;
/** Keys looked up per replay step: at most 16 entries of a request's size (256 KiB) in memory at once. */
const REPLAY_BATCH = 16;

export class RedisDeadLetters implements DeadLetters {
  private droppedCount = 0;

  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly bounds: DeadLetterBounds,
    private readonly run: Run,
    private readonly guard: Guard,
  ) {}

  /** complete.lua's ARGV[7] for a job dead-lettered with `reply`: the bounds, then the entry. */
  deadLetterArg(job: Job, reply: Reply, now: number): string {
    // As data: a replayed dead letter must not carry the recorded reply of its first life.
    const { recordedReply: _recorded, ...data } = job as ExpiredJob;
    return `${this.boundsArg(now)}${storedEntry({ job: withoutImageBytes(data), reply, atMs: now })}`;
  }

  /** What complete.lua (or the upgrade) said the bounds dropped. */
  noteDropped(count: number): void {
    this.droppedCount += count;
  }

  async page(limit: number, after: string | undefined, now: number): Promise<DeadLetterPage> {
    const from = after === undefined ? '' : fromCursor(after);
    if (from === undefined) throw new RangeError('not a dead-letter cursor');
    const args = [this.keys.base, from, oldestKept(this.bounds, now), limit, DEAD_LETTER_PAGE_BYTES];
    const [last, ...stored] = (await this.run('dlq-page', [this.keys.dlqIndex], args)) as string[];
    return { entries: stored.filter((s) => s !== '').map(parseStored), next: last ? toCursor(last) : undefined };
  }

  async get(key: string, now: number): Promise<DeadLetter | undefined> {
    const stored = await this.guard(this.redis.hget(this.keys.dlqEntries, key));
    return stored === null || stored.slice(0, 13) < oldestKept(this.bounds, now) ? undefined : parseStored(stored);
  }

  async stats(now: number): Promise<{ count: number; bytes: number }> {
    const [count, bytes] = (await this.run('dlq-stats', [this.keys.dlqIndex], [this.keys.base, oldestKept(this.bounds, now)])) as [number, number];
    return { count, bytes };
  }

  async replay(keys: string[], offsetsMs: ReplayOffsets, now: number): Promise<number> {
    let replayed = 0;
    for (let i = 0; i < keys.length; i += REPLAY_BATCH) {
      const batch = keys.slice(i, i + REPLAY_BATCH);
      if (batch.length === 0) continue;
      const stored = await this.guard(this.redis.hmget(this.keys.dlqEntries, ...batch));
      const oldest = oldestKept(this.bounds, now);
      const letters = stored.flatMap((s) => (s === null || s.slice(0, 13) < oldest ? [] : [parseStored(s)]));
      replayed += await this.replayLetters(letters, offsetsMs, now);
    }
    return replayed;
  }

  replayAll(offsetsMs: ReplayOffsets, now: number): Promise<number> {
    return replayInPages(this, (entries) => this.replayLetters(entries, offsetsMs, now), now);
  }

  async purge(): Promise<number> {
    const k = this.keys;
    const result = await this.guard(this.redis.multi().zcard(k.dlqIndex).unlink(k.dlqIndex, k.dlqEntries, k.dlqBytes).exec());
    return Number(result?.[0]?.[1] ?? 0);
  }

  dropped(): number {
    return this.droppedCount;
  }

  /** Moves 0.7's dead-letter list into this one, oldest first, within the bounds; returns how many. */
  async upgrade(now: number): Promise<number> {
    let moved = 0;
    for (;;) {
      const raw = await this.guard(this.redis.lrange(this.keys.oldDlq, 0, UPGRADE_BATCH - 1));
      if (raw.length === 0) return moved;
      const args: LuaArg[] = [this.keys.base, this.boundsArg(now)];
      for (const entry of raw) {
        const { job, atMs } = JSON.parse(entry) as DeadLetter;
        args.push(entry, job.key, timeField(atMs));
      }
      const [count, dropped] = (await this.run('dlq-upgrade', [this.keys.oldDlq], args)) as [number, number];
      this.noteDropped(dropped);
      moved += count; // fewer than read: another instance moved them meanwhile
    }
  }

  private boundsArg(now: number): string {
    return `${this.bounds.max}|${this.bounds.maxBytes}|${oldestKept(this.bounds, now)}|`;
  }

  private async replayLetters(letters: DeadLetter[], offsetsMs: ReplayOffsets, now: number): Promise<number> {
    if (letters.length === 0) return 0;
    const args: LuaArg[] = [this.keys.base];
    for (const { job, atMs } of letters) {
      const { attempts: _attempts, ...data } = replayedJob(job, offsetsMs, now);
      args.push(timeField(atMs), job.key, JSON.stringify(data), data.score, job.priority, lockId(job.request.lock), job.tokenEstimate);
    }
    return (await this.run(
      'replay',
      letters.map(({ job }) => this.keys.idem(job.key)),
      args,
    )) as number;
  }
}
