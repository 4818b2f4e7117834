// A condition that repeats (a broker or Redis out of reach, a store that cannot answer) is
// logged when it starts, then at most once per interval with the count of repeats since the
// last line, then once when it ends: a retry every half second must not write a line each
// time, and an operator still sees how long it lasted and how often it was met.
import type { Logger } from './logger.js';

/** At most one line per condition in this long, while it lasts. */
export const REPEAT_LOG_INTERVAL_MS = 60_000;

export interface RepeatingMessages {
  /** The first time (warn). */
  started: string;
  /** While it lasts, at most once per interval (warn). */
  repeating: string;
  /** Once every source works again (info). */
  ended: string;
}

export interface RepeatingLogOptions {
  intervalMs?: number;
  now?: () => number;
}

/** What reports a condition: a repeating log, or anything shaped like one (broker/ takes this). */
export interface ConditionReport {
  /** `source` met the condition (again). */
  fail(source: string, err?: unknown, fields?: Record<string, unknown>): void;
  /** `source` works again. */
  ok(source: string): void;
}

/**
 * One condition, met by one or more sources (the connections to one broker, every part that
 * uses Redis): it lasts while any of them fails, so several sources share one set of lines.
 */
export class RepeatingLog implements ConditionReport {
  private readonly failing = new Set<string>();
  private readonly intervalMs: number;
  private readonly now: () => number;
  private startedAt = 0;
  private lastLineAt = 0;
  private sinceLine = 0;
  private total = 0;
  private quiet = false;

  constructor(
    private readonly logger: Logger,
    private readonly messages: RepeatingMessages,
    options: RepeatingLogOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? REPEAT_LOG_INTERVAL_MS;
    this.now = options.now ?? Date.now;
  }

  get active(): boolean {
    return this.failing.size > 0;
  }

  fail(source: string, err?: unknown, fields: Record<string, unknown> = {}): void {
    if (this.quiet) return;
    const at = this.now();
    if (this.failing.size === 0) {
      this.failing.add(source);
      this.startedAt = at;
      this.lastLineAt = at;
      this.sinceLine = 0;
      this.total = 1;
      this.logger.warn({ source, ...fields, ...errorFields(err) }, this.messages.started);
      return;
    }
    this.failing.add(source);
    this.total += 1;
    this.sinceLine += 1;
    if (at - this.lastLineAt < this.intervalMs) return;
    this.logger.warn({ source, ...fields, ...errorFields(err), repeats: this.sinceLine, forMs: at - this.startedAt }, this.messages.repeating);
    this.lastLineAt = at;
    this.sinceLine = 0;
  }

  ok(source: string): void {
    // Cheap when nothing fails: called after every successful claim.
    if (this.failing.size === 0 || !this.failing.delete(source) || this.failing.size > 0) return;
    if (this.quiet) return;
    this.logger.info({ forMs: this.now() - this.startedAt, count: this.total }, this.messages.ended);
  }

  /** Closing: connections dropping now are expected, and nothing more is logged. */
  silence(): void {
    this.quiet = true;
  }
}

/** Network codes a retry is the answer to: logged as a message, without a stack trace. */
const EXPECTED_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  // The store's contract code while Redis is away.
  'unavailable',
]);

/** ioredis' and mqtt.js' words for a connection that is gone or not there yet. */
const EXPECTED_MESSAGES =
  /connection is closed|stream isn't writeable|max retries per request|connack timeout|connection closed|client disconnecting|command timed out|socket closed/i;

/** An expected error as its message (and code); anything else whole, stack included. */
export function errorFields(err: unknown): Record<string, unknown> {
  if (err === undefined) return {};
  if (!(err instanceof Error)) return { err: String(err) };
  if (!isExpected(err)) return { err };
  const code = (err as { code?: unknown }).code;
  return code === undefined ? { err: err.message } : { err: err.message, code };
}

export function isExpected(err: Error): boolean {
  const code = (err as { code?: unknown }).code;
  // A number is an MQTT reason code: the broker's answer, not a bug of ours.
  return typeof code === 'number' || (typeof code === 'string' && EXPECTED_CODES.has(code)) || EXPECTED_MESSAGES.test(err.message);
}
