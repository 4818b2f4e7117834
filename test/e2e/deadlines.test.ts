// A request's ttl_ms (or MQTT 5 Message Expiry) promises an answer by its deadline: a request
// still queued then is answered `expired` then, even when nothing else happens at the bridge
// (no slot frees, no other request arrives whose admission would claim). Real MQTT over TCP,
// each store: memory, and Redis under a fresh prefix.
import { afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../contract/index.js';
import { ask, startHarness, type Device, type Harness } from '../helpers/harness.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { eventually } from '../helpers/wait.js';

/** The upstream answers the request ahead this late: far past every deadline and wait below. */
const SLOW_MS = 6000;
/** A generous bound on the `expired` answer's wait, against a deadline 300 ms after the publish. */
const ANSWER_BOUND_MS = 3000;

const STORES = [
  { store: 'memory', env: (): Record<string, string> => ({}) },
  { store: 'Redis', env: (prefix: string): Record<string, string> => ({ REDIS_URL, REDIS_PREFIX: prefix }) },
];

function expectExpired(reply: Reply | undefined, id: string): void {
  expect(reply).toMatchObject({ id, ok: false, error: { code: 'expired' } });
}

describe.each(STORES)('a queued request whose deadline passes while the upstream is saturated ($store store)', ({ store, env }) => {
  const prefix = uniquePrefix('deadline');
  let h: Harness | undefined;

  afterEach(async () => {
    await h?.close();
    h = undefined;
    if (store !== 'Redis') return;
    const redis = connectRedis();
    try {
      await deletePrefix(redis, prefix);
    } finally {
      redis.disconnect();
    }
  });

  /** A bridge with one slot, held by a request the upstream answers only after SLOW_MS. */
  async function saturated(protocolVersion: 4 | 5 = 4): Promise<Device> {
    h = await startHarness({ MAX_CONCURRENCY: '1', ...env(prefix) }, { latencyMs: SLOW_MS });
    const device = await h.device(`cam-deadline-${protocolVersion}`, { protocolVersion });
    await device.publish('critical', ask('slow'));
    const upstream = h.upstream;
    await eventually('the slow request at the upstream', () => upstream.requests.length === 1);
    return device;
  }

  it('answers it `expired` with no other request arriving, while the slot stays busy', async () => {
    const device = await saturated();
    await device.publish('critical', ask('short', 'hurry', { ttl_ms: 300 }));

    const [reply] = await device.reply('short', { timeoutMs: ANSWER_BOUND_MS });
    expectExpired(reply, 'short');
    // Nothing freed the slot meanwhile: the request ahead is still at the upstream.
    expect(device.replies.map((r) => r.id)).toEqual(['short']);
    const [slow] = await device.reply('slow', { timeoutMs: SLOW_MS + 3000 });
    expect(slow).toMatchObject({ id: 'slow', ok: true });
    // The expired request never reached the upstream.
    expect(h?.upstream.requests).toHaveLength(1);
  });

  it('answers an MQTT 5 request `expired` at its Message Expiry the same way', async () => {
    const device = await saturated(5);
    const body = JSON.stringify(ask('short-5', 'hurry'));
    await device.client.publishAsync(`devices/${device.deviceId}/infer/critical`, body, { qos: 1, properties: { messageExpiryInterval: 1 } });

    const [reply] = await device.reply('short-5', { timeoutMs: 1000 + ANSWER_BOUND_MS });
    expectExpired(reply, 'short-5');
    expect(device.replies.map((r) => r.id)).toEqual(['short-5']);
  });
});
