// What one upstream attempt may have cost the upstream's token budget, read from its outcome.
// The scheduler settles that attempt's reservation in RATE_LIMIT_TPM's window by it, so a
// request retried over several keys or providers holds only what its attempts may have used.
import type { Outcome } from './outcome.js';

/**
 * - `nothing`: refused before generating (any HTTP error status, a connection that never
 *   opened, a request that could not be sent): its reservation settles to 0.
 * - `estimate`: it may have generated (a timeout, a connection or stream broken after the
 *   request went out, an unusable 200): its reservation keeps the estimate.
 * - `usage`: answered; the answer's reported usage settles it.
 */
export type AttemptSpend = 'nothing' | 'estimate' | 'usage';

/** Failures to connect at all: the request never reached the upstream. */
const NEVER_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** Whether a network error's code says the request never reached the upstream. */
export function neverConnected(code: string | undefined): boolean {
  return code !== undefined && NEVER_CONNECTED.has(code);
}

export function attemptSpend(outcome: Outcome): AttemptSpend {
  if (outcome.kind === 'ok') return 'usage';
  if (outcome.kind !== 'retry' || outcome.timeout) return outcome.kind === 'retry' ? 'estimate' : 'nothing';
  if (outcome.status === undefined) return outcome.unsent === true ? 'nothing' : 'estimate';
  return outcome.status < 300 ? 'estimate' : 'nothing';
}
