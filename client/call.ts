// One call: its request id, its attempts and timers, and the promise its caller awaits. The
// client decides when an attempt goes out; the call keeps the deadline and settles once.
import type { ErrorReply, OkReply } from '../contract/index.js';
import { BridgeRequestError, type ClientErrorCode } from './errors.js';

/** What one attempt publishes; built anew each time, so `ttl_ms` is the time then left. */
export interface Outgoing {
  topic: string;
  payload: Buffer | string;
  userProperties?: Record<string, string>;
  /** MQTT 5 Message Expiry Interval, seconds. */
  expirySeconds?: number;
}

export interface CallHooks {
  /** A `stream` call's chunks on `devices/{id}/stream`, as they come (already matched by id). */
  onChunk?: (chunk: { seq: number; delta?: string; reset?: boolean }) => void;
}

/**
 * Where an unsettled call stands: `waiting` for an in-flight slot; `unsent`, to go out as soon
 * as the connection is up; `sent`, published; `acked`, its latest publish acknowledged by the
 * broker (after a reconnect it is published again); `backoff`, waiting out a refusal.
 */
export type CallState = 'waiting' | 'unsent' | 'sent' | 'acked' | 'backoff';

export class Call {
  attempts = 0;
  state: CallState = 'waiting';
  done = false;
  /** The MQTT 5 Correlation Data: the id's bytes, made once for every attempt. */
  readonly correlation: Buffer;
  readonly promise: Promise<OkReply>;
  private resolveReply!: (reply: OkReply) => void;
  private rejectReply!: (err: BridgeRequestError) => void;
  private timer: NodeJS.Timeout | undefined;
  private readonly deadlineTimer: NodeJS.Timeout;

  constructor(
    readonly id: string,
    readonly deadline: number,
    readonly build: (timeLeftMs: number) => Outgoing,
    readonly hooks: CallHooks,
    onDeadline: (call: Call) => void,
  ) {
    this.correlation = Buffer.from(id);
    this.promise = new Promise<OkReply>((resolve, reject) => {
      this.resolveReply = resolve;
      this.rejectReply = reject;
    });
    this.deadlineTimer = setTimeout(() => onDeadline(this), Math.max(0, deadline - Date.now()));
  }

  timeLeft(now = Date.now()): number {
    return this.deadline - now;
  }

  /** Runs `fn` after `ms` unless the call settles first; replaces any earlier timer. */
  after(ms: number, fn: () => void): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(fn, ms);
  }

  resolve(reply: OkReply): void {
    if (this.settle()) this.resolveReply(reply);
  }

  refuse(reply: ErrorReply): void {
    if (this.settle()) this.rejectReply(BridgeRequestError.fromReply(reply, this.id, this.attempts));
  }

  fail(code: ClientErrorCode, message: string, reasonCode?: number): void {
    if (this.settle()) this.rejectReply(new BridgeRequestError(code, message, { requestId: this.id, attempts: this.attempts, reasonCode }));
  }

  private settle(): boolean {
    if (this.done) return false;
    this.done = true;
    clearTimeout(this.timer);
    clearTimeout(this.deadlineTimer);
    return true;
  }
}
