// The client's errors: one type for a call that failed, whatever failed it, so device code
// switches on `code` alone; the contract's codes as the bridge sent them, and the client's own.
import type { ErrorCode, ErrorReply } from '../contract/index.js';

/**
 * Failures the client itself decides: no reply by the deadline, an abort, close(), a full
 * offline buffer, or a broker that dropped the request (not authorized, too large).
 */
export type ClientErrorCode = 'timeout' | 'aborted' | 'closed' | 'offline' | 'refused';

/** Codes worth a retry with the same id: the request was refused for now, not for what it is. */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set<ErrorCode>(['queue_full', 'rate_limited', 'unavailable']);

export interface RequestErrorDetails {
  requestId: string;
  attempts: number;
  retryAfterMs?: number | undefined;
  reply?: ErrorReply | undefined;
  /** `refused`: the broker's MQTT 5 reason code, when it gave one. */
  reasonCode?: number | undefined;
}

/** A call that ended without an ok reply. */
export class BridgeRequestError extends Error {
  override readonly name = 'BridgeRequestError';
  readonly requestId: string;
  readonly attempts: number;
  readonly retryAfterMs: number | undefined;
  /** The error reply as received, when the bridge sent one. */
  readonly reply: ErrorReply | undefined;
  readonly reasonCode: number | undefined;

  constructor(
    readonly code: ErrorCode | ClientErrorCode,
    message: string,
    details: RequestErrorDetails,
  ) {
    super(message);
    this.requestId = details.requestId;
    this.attempts = details.attempts;
    this.retryAfterMs = details.retryAfterMs;
    this.reply = details.reply;
    this.reasonCode = details.reasonCode;
  }

  static fromReply(reply: ErrorReply, requestId: string, attempts: number): BridgeRequestError {
    const { code, message, retry_after_ms: retryAfterMs } = reply.error;
    return new BridgeRequestError(code, message, { requestId, attempts, retryAfterMs, reply });
  }
}

/** `connect` failed: the broker refused the login, or no connection came up in time. */
export class BridgeConnectError extends Error {
  override readonly name = 'BridgeConnectError';
  constructor(
    message: string,
    /** The CONNACK return code (3.1.1) or reason code (5), when the broker refused. */
    readonly reasonCode?: number,
    /** The last socket error (ECONNREFUSED…), when no connection came up. */
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
