// Isolation: a request's `lock` goes upstream in the X-Lock-Key header. A lock no header can
// carry as it is (Japanese, CR/LF) must neither fail as a provider failure nor open the
// circuit breaker the fleet shares through Redis: it is sent percent-encoded. Two instances on
// one Redis: the attacker on A, an innocent critical request on B, answered within 5 s; both
// /readyz stay 200 and the shared breaker records no failure.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../../upstream-sim/sim.js';
import { startFleet, type Fleet } from '../../helpers/fleet.js';
import { ask, type Harness } from '../../helpers/harness.js';
import { connectRedis } from '../../helpers/redis.js';
import { breakerRecord, readyzOf } from './upstream-blame.js';

const redis = connectRedis();
afterAll(() => redis.disconnect());

const LOCKS = ['ライン-3', 'line-3\r\nx-injected: 1', 'Ofen-Süd', 'ライン-3 / 腕'];
const contentOf = (r: RecordedRequest): string => (r.body as { messages: Array<{ content: string }> }).messages[0]?.content ?? '';

describe('isolation: a lock that no header can carry as it is', () => {
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
  });

  it('is sent encoded, never fails as a provider failure, and leaves the shared breaker closed', { timeout: 30_000 }, async () => {
    // Five consecutive failures open the circuit (the default): counted as provider failures,
    // two such requests (three attempts each) were enough.
    fleet = await startFleet(2, { MAX_ATTEMPTS: '3' }, { latencyMs: 5 });
    const [a, b] = fleet.instances as [Harness, Harness];
    const attacker = await a.device('attacker');
    const innocent = await b.device('innocent');

    const ids = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => `att-${i}`);
    await Promise.all(ids.map((id, i) => attacker.publish('normal', ask(id, id, { lock: LOCKS[i % LOCKS.length] }))));
    // The attacker gets a reply for each request (checked last: the harm to others comes first).
    const attackerReplies = await Promise.all(ids.map(async (id) => (await attacker.reply(id, { timeoutMs: 10_000 }))[0]));

    const started = Date.now();
    await innocent.publish('critical', ask('innocent-1'));
    const [reply] = await innocent.reply('innocent-1', { timeoutMs: 5000 });
    expect(reply).toMatchObject({ id: 'innocent-1', ok: true });
    expect(Date.now() - started).toBeLessThan(5000);

    expect(await readyzOf(a)).toBe(200);
    expect(await readyzOf(b)).toBe(200);
    expect(await breakerRecord(redis, fleet.prefix)).toMatchObject({ consecutive: 0, windowFailures: 0 });
    expect((await breakerRecord(redis, fleet.prefix)).state ?? 'c').toBe('c');
    // Nothing was wrong with the attacker's requests: each is answered.
    expect(attackerReplies.map((r) => r?.ok)).toEqual(ids.map(() => true));

    // What the upstream got: one call per request, each lock percent-encoded, no injected header.
    const calls = fleet.upstream.requests.filter((r) => contentOf(r).startsWith('att-'));
    expect(calls).toHaveLength(ids.length);
    for (const call of calls) {
      const sent = String(call.headers['x-lock-key']);
      expect(sent).toMatch(/^[\x21-\x7e]+$/);
      expect(LOCKS).toContain(decodeURIComponent(sent));
      expect(call.headers['x-injected']).toBeUndefined();
    }
  });
});
