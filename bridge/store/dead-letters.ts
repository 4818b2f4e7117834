// What both stores' dead-letter lists share: the order of entries (an index member,
// `<time, 13 digits>|<job key>`, so the oldest sorts first in byte order and one job has one
// entry), the cursor a page hands out, an entry's stored size, and replay-all in pages.
import type { Priority } from '../../contract/index.js';
import type { DeadLetter, DeadLetterBounds, DeadLetters } from './port.js';

/** The defaults of DLQ_MAX, DLQ_MAX_BYTES and DLQ_TTL_S. */
export const DEFAULT_DEAD_LETTER_BOUNDS: DeadLetterBounds = Object.freeze({ max: 10_000, maxBytes: 67_108_864, ttlS: 604_800 });
/** A page stops once its entries' stored size passes this (a page holds at least one entry). */
export const DEAD_LETTER_PAGE_BYTES = 4_194_304;
/** Entries replayed per step of replayAll. */
const REPLAY_BATCH = 100;
/** `<time>|`: the part of an index member (and of a stored entry) before the job key. */
export const TIME_PREFIX_CHARS = 14;
const MEMBER = /^\d{13}\|[^|]+$/;

/** A time as it leads an index member: 13 digits sort like the numbers until the year 2286. */
export const timeField = (atMs: number): string => String(Math.max(0, Math.floor(atMs))).padStart(13, '0');

export const memberOf = (atMs: number, key: string): string => `${timeField(atMs)}|${key}`;

/** The first index member an entry kept at `now` may have (anything older is past DLQ_TTL_S). */
export const oldestKept = (bounds: DeadLetterBounds, now: number): string => timeField(now - bounds.ttlS * 1000);

/** The cursor of a page that ended at `member`: opaque to readers, safe in a URL. */
export const toCursor = (member: string): string => Buffer.from(member, 'utf8').toString('base64url');

/** The index member a cursor stands for; undefined when it is not one a page handed out. */
export function fromCursor(cursor: string): string | undefined {
  if (cursor.length > 400 || !/^[A-Za-z0-9_-]+$/.test(cursor)) return undefined;
  const member = Buffer.from(cursor, 'base64url').toString('utf8');
  return MEMBER.test(member) ? member : undefined;
}

/** An entry as a store keeps it: `<time>|<JSON>`; its length in bytes is what DLQ_MAX_BYTES counts. */
export const storedEntry = (letter: DeadLetter): string => `${timeField(letter.atMs)}|${JSON.stringify(letter)}`;

export const parseStored = (stored: string): DeadLetter => JSON.parse(stored.slice(TIME_PREFIX_CHARS)) as DeadLetter;

/**
 * Replays every entry kept at `now`, oldest first, one page at a time; entries dead-lettered
 * after `now` (a replayed job that failed again) are left for the next replay.
 */
export async function replayInPages(letters: Pick<DeadLetters, 'page'>, replayPage: (entries: DeadLetter[]) => Promise<number>, now: number): Promise<number> {
  let replayed = 0;
  let after: string | undefined;
  for (;;) {
    const page = await letters.page(REPLAY_BATCH, after, now);
    const due = page.entries.filter((e) => e.atMs <= now);
    if (due.length > 0) replayed += await replayPage(due);
    if (page.next === undefined || due.length < page.entries.length) return replayed;
    after = page.next;
  }
}

export type ReplayOffsets = Record<Priority, number>;
