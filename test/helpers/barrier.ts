// A barrier on a device's request path, for tests that check nothing more came (a second reply,
// another upstream call): something sure to arrive after what they fear, instead of a sleep.
import type { Priority } from '../../contract/index.js';
import type { RecordedRequest, UpstreamSim } from '../../upstream-sim/sim.js';
import { ask, type Device } from './harness.js';

const BARRIER = 'barrier';

/**
 * Asks once more from `asker` at `priority` and waits for that reply on `asker` and every device
 * in `also`. The bridge takes a device's requests of one priority in order and its replies go out
 * on one topic in order, so a further run, upstream call or reply for an earlier request of that
 * device came before this reply.
 */
export async function barrier(asker: Device, priority: Priority, also: Device[] = []): Promise<void> {
  await asker.publish(priority, ask(BARRIER, BARRIER));
  await Promise.all([asker, ...also].map((d) => d.reply(BARRIER)));
}

/** The upstream's calls before the barrier's, which must be its last. */
export function callsBeforeBarrier(upstream: UpstreamSim): RecordedRequest[] {
  const seen = upstream.requests;
  const last = seen.at(-1)?.body as { messages?: Array<{ content?: unknown }> } | undefined;
  if (last?.messages?.[0]?.content !== BARRIER) throw new Error(`the upstream's last call is not the barrier's: ${JSON.stringify(last)}`);
  return seen.slice(0, -1);
}
