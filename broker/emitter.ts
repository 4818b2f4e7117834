// Aedes routes every PUBLISH through an MQEmitter, which by default lets 100 messages be in
// delivery at once and queues the rest. Under a burst that queue is where Aedes breaks down:
// it is drained with Array#shift (O(n): it can take the broker's whole CPU and deliver nothing),
// and a queued message with no subscribers (every request topic) completes synchronously
// inside `released`, which starts the next one, so a long queue overflows the stack
// ("Maximum call stack size exceeded", the broker dies). With no limit nothing is queued.
// What is in delivery stays bounded elsewhere: Aedes reads one batch per client at a time,
// and the bridge's replies are bounded by MAX_CONCURRENCY and load shedding.
import mqemitter from 'mqemitter';

/** MQEmitter's "no limit". */
export const MQ_CONCURRENCY = 0;

export function createLocalEmitter(): ReturnType<typeof mqemitter> {
  return mqemitter({ concurrency: MQ_CONCURRENCY, matchEmptyLevels: true });
}
