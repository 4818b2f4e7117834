// What the SCADA outputs (UNS and Sparkplug) share across a fleet of instances: the last good
// answer of each device's template (a tag keeps its last good value when an answer fails, and
// a Sparkplug birth carries every tag's current value), the Sparkplug Edge Node's bdSeq and
// its one-publisher lease, and every instance's answers handed to that publisher.
// Implementations: memory (one process) and Redis; one test suite runs over both.
import { DEFAULT_STRING_MAX_LENGTH, type ScadaAnswer } from '../../contract/index.js';

/**
 * One last-good record's JSON at most: an output of 64 fields (its most), each named in 64
 * characters and holding a string of the default maxLength, plus the answer's own fields.
 * A larger record (strings with a larger maxLength, or non-ASCII) is published, not kept.
 */
export const SCADA_RECORD_MAX_BYTES = 64 * (64 + DEFAULT_STRING_MAX_LENGTH + 16) + 4096;

/** Bounds of the last-good records: every shared store has one in entries, bytes and age. */
export interface ScadaStateBounds {
  /** Device-template pairs kept; the least recently answered go first. */
  maxEntries: number;
  /** One record's JSON, in bytes: a larger one is not kept. */
  maxRecordBytes: number;
  /** A record not renewed for this long is gone. */
  ttlS: number;
}

/**
 * What every instance hands to the Edge Node's publisher: an answer, or a device gone offline.
 * An answer of quality `bad` carries the last good `data` when one is kept (as UNS publishes it).
 */
export type ScadaEvent = { kind: 'answer'; answer: ScadaAnswer } | { kind: 'gone'; deviceId: string; atMs: number };

export interface ScadaState {
  /** Keeps a good answer as its device-template's last good one (replacing the previous). */
  keepGood(answer: ScadaAnswer): Promise<void>;
  /** The device-template's last good answer, if one is kept. */
  lastGood(deviceId: string, template: string): Promise<ScadaAnswer | undefined>;
  /** Every kept last good answer, most recent first, at most `limit` (Sparkplug births). */
  allGood(limit: number): Promise<ScadaAnswer[]>;
  /** The Edge Node's next bdSeq (0–255, wrapping), kept across restarts and instances. */
  nextBdSeq(node: string): Promise<number>;
  /**
   * Takes or renews the Edge Node's publisher lease for `owner` for `ttlMs`; true while
   * `owner` holds it. Exactly one owner holds a node's lease at a time.
   */
  holdLease(node: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up (a clean stop), if `owner` holds it. */
  releaseLease(node: string, owner: string): Promise<void>;
  /**
   * The bdSeq of the Edge Node session whose NBIRTH is out and whose NDEATH is not (undefined
   * once ended). With the embedded broker no Will outlives a killed holder: its successor
   * reads this and publishes that NDEATH before its own NBIRTH. Kept without expiry (one
   * small value per node).
   */
  openSession(node: string): Promise<number | undefined>;
  /** Records (a number) or clears (undefined) the node's open session. */
  setOpenSession(node: string, bdSeq: number | undefined): Promise<void>;
  /** Hands an event to whichever instance publishes the Edge Node (at most once, in order per instance). */
  announce(event: ScadaEvent): Promise<void>;
  /** Called with every instance's announced events, this one's included; returns the unsubscribe. */
  onAnnounce(listener: (event: ScadaEvent) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}
