// Choosing the provider for an attempt: the candidates in the order a call tries them, and
// the scans over them (which one takes the next attempt, which one likely will, when any can).
import type { Route } from '../config/config-file.js';
import { NO_PROBE, type Breaker, type Permit } from './breaker.js';
import type { Provider } from './provider.js';

/** A provider of the chain with its breaker (none when the chain runs without breakers). */
export interface Member {
  provider: Provider;
  breaker: Breaker | undefined;
}

/** A provider and key that take the next attempt, and where in the candidates it was found. */
export interface Chosen {
  member: Member;
  position: number;
  keyIndex: number;
  permit: Permit;
}

/** What the scan of the candidates found. */
export type Selection =
  | ({ kind: 'go' } & Chosen)
  /** Nothing now, but a rate-limited key is ready at `readyAt`. */
  | { kind: 'wait'; readyAt: number }
  /** Nothing will be: circuits open, keys refused. */
  | { kind: 'none'; reasons: string[]; retryAt: number | undefined };

const seconds = (ms: number): string => `${(Math.max(0, ms) / 1000).toFixed(1)} s`;

const earliest = (known: number | undefined, at: number): number => (known === undefined ? at : Math.min(known, at));

/** The route's provider first, then the chain order. */
export function candidatesFor(members: Member[], route: Route): Member[] {
  if (route.provider === undefined) return members;
  const pinned = members.find((m) => m.provider.name === route.provider);
  return pinned ? [pinned, ...members.filter((m) => m !== pinned)] : members;
}

/** What one scan has gathered so far about the candidates it could not use. */
interface Skipped {
  reasons: string[];
  readyAt: number | undefined;
  retryAt: number | undefined;
}

/**
 * The first candidate from `start` (wrapping around) with a key ready and a circuit that
 * admits the call. The key check comes first: it is local, and the breaker's admission may
 * grant the half-open probe, which must then be used.
 */
export async function select(candidates: Member[], start: number, clock: () => number): Promise<Selection> {
  const skipped: Skipped = { reasons: [], readyAt: undefined, retryAt: undefined };
  for (let step = 0; step < candidates.length; step += 1) {
    const position = (start + step) % candidates.length;
    const member = candidates[position] as Member;
    const chosen = await tryMember(member, clock, skipped);
    if (chosen) return { kind: 'go', member, position, keyIndex: chosen.keyIndex, permit: chosen.permit };
  }
  if (skipped.readyAt !== undefined) return { kind: 'wait', readyAt: skipped.readyAt };
  return { kind: 'none', reasons: skipped.reasons, retryAt: skipped.retryAt };
}

/**
 * select's answer when it is the candidate at `start`, ready now, and its breaker admits the
 * call without a round trip (the common case: the memory store, or Redis seen closed lately);
 * undefined when select must scan (nothing is taken then: no key picked, no probe granted).
 */
export function selectNow(candidates: Member[], start: number, clock: () => number): Extract<Selection, { kind: 'go' }> | undefined {
  const position = start % candidates.length;
  const member = candidates[position] as Member;
  const { provider, breaker } = member;
  const now = clock();
  const keysReady = provider.keys.readyAt(now);
  if (keysReady === undefined || keysReady > now) return undefined;
  let permit = NO_PROBE;
  if (breaker) {
    const admission = breaker.admitNow();
    // Refused: select asks again and hears the same (a refusal changes nothing in the store).
    if (!admission?.ok) return undefined;
    permit = admission.permit;
  }
  const keyIndex = provider.keys.pick(clock());
  if (keyIndex === undefined) {
    // Only if the clock went back since readyAt: select scans again from the start.
    void breaker?.release(permit);
    return undefined;
  }
  return { kind: 'go', member, position, keyIndex, permit };
}

/** A key and permit on `member`, or undefined (and why, in `skipped`). */
async function tryMember(member: Member, clock: () => number, skipped: Skipped): Promise<{ keyIndex: number; permit: Permit } | undefined> {
  const { provider, breaker } = member;
  const now = clock();
  const keysReady = provider.keys.readyAt(now);
  if (keysReady === undefined) {
    skipped.reasons.push(`${provider.name}: every API key was refused`);
    return undefined;
  }
  if (keysReady > now) {
    skipped.readyAt = earliest(skipped.readyAt, keysReady);
    return undefined;
  }
  let permit = NO_PROBE;
  if (breaker) {
    const admission = await breaker.acquire();
    if (!admission.ok) {
      skipped.retryAt = earliest(skipped.retryAt, admission.retryAt);
      skipped.reasons.push(
        admission.state === 'open'
          ? `${provider.name}: circuit open, half-opens in ${seconds(admission.retryAt - now)}`
          : `${provider.name}: circuit half-open, its probe call is running`,
      );
      return undefined;
    }
    permit = admission.permit;
  }
  // Another call may have cooled the last ready key while the breaker answered.
  const keyIndex = provider.keys.pick(clock());
  if (keyIndex === undefined) {
    await breaker?.release(permit);
    const again = provider.keys.readyAt(clock());
    if (again !== undefined) skipped.readyAt = earliest(skipped.readyAt, again);
    else skipped.reasons.push(`${provider.name}: every API key was refused`);
    return undefined;
  }
  return { keyIndex, permit };
}

/** Without a round trip: the candidate the next scan from `start` will most likely pick. */
export function peek(candidates: Member[], start: number, now: number): Member | undefined {
  for (let step = 0; step < candidates.length; step += 1) {
    const member = candidates[(start + step) % candidates.length] as Member;
    const keysReady = member.provider.keys.readyAt(now);
    if (keysReady !== undefined && keysReady <= now && (member.breaker?.mayAdmit(now) ?? true)) return member;
  }
  return undefined;
}

/**
 * When the chain can take a call on a key other than `except` (the one that just answered
 * 429), as far as this instance knows: now if some candidate has such a key ready (and its
 * circuit is not known to be open), else the end of the earliest cool-down; undefined when
 * no other key is left at all.
 */
export function chainReadyAt(candidates: Member[], now: number, except: { provider: Provider; keyIndex: number }): number | undefined {
  let soonest: number | undefined;
  for (const { provider, breaker } of candidates) {
    const at = provider.keys.readyAt(now, provider === except.provider ? except.keyIndex : undefined);
    if (at === undefined) continue;
    if (at <= now && breaker && !breaker.mayAdmit(now)) continue;
    soonest = earliest(soonest, at);
  }
  return soonest;
}
