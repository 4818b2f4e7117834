// Isolation: a request the upstream refuses as bad (400, 404, 413, 422: a malformed field, an
// unknown model, too large, unprocessable) fails alone. Its device gets invalid_request with
// the upstream's message; nothing is retried, no other provider is tried, the breaker shared
// through Redis records nothing, and an innocent critical request on another instance is
// answered within 5 s while both /readyz stay 200.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../../../upstream-sim/sim.js';
import { startUpstreamSim, type UpstreamSim } from '../../../upstream-sim/sim.js';
import { startFleet, type Fleet } from '../../helpers/fleet.js';
import { ask, type Harness } from '../../helpers/harness.js';
import { connectRedis } from '../../helpers/redis.js';
import { breakerRecord, readyzOf } from './upstream-blame.js';

const redis = connectRedis();
afterAll(() => redis.disconnect());

const REFUSALS = [400, 404, 413, 422, 400, 404, 413, 422];
const contentOf = (r: RecordedRequest): string => (r.body as { messages: Array<{ content: string }> }).messages[0]?.content ?? '';

describe('isolation: a request the upstream refuses as bad', () => {
  let fleet: Fleet | undefined;
  let fallback: UpstreamSim | undefined;
  afterEach(async () => {
    await fleet?.close();
    await fallback?.close();
    fleet = fallback = undefined;
  });

  it('fails alone: invalid_request, one attempt, no fallback, no breaker event; the innocent is served', { timeout: 30_000 }, async () => {
    fallback = await startUpstreamSim({ port: 0, latencyMs: 5 });
    fleet = await startFleet(2, { MAX_ATTEMPTS: '3', FALLBACK_URL: fallback.url }, { latencyMs: 5 });
    const [a, b] = fleet.instances as [Harness, Harness];
    const attacker = await a.device('attacker');
    const innocent = await b.device('innocent');

    // One at a time, so each scripted refusal meets the attacker's request.
    const attackerReplies = [];
    for (const [i, status] of REFUSALS.entries()) {
      fleet.upstream.script({ status });
      const id = `att-${i}`;
      await attacker.publish('normal', ask(id, id));
      attackerReplies.push({ status, reply: (await attacker.reply(id, { timeoutMs: 5000 }))[0] });
    }

    const started = Date.now();
    await innocent.publish('critical', ask('innocent-1'));
    const [reply] = await innocent.reply('innocent-1', { timeoutMs: 5000 });
    expect(reply).toMatchObject({ id: 'innocent-1', ok: true });
    expect(Date.now() - started).toBeLessThan(5000);

    // One upstream call per refused request, none on the fallback; the circuit saw nothing.
    expect(fleet.upstream.requests.filter((r) => contentOf(r).startsWith('att-'))).toHaveLength(REFUSALS.length);
    expect(fallback.requests).toHaveLength(0);
    expect(await breakerRecord(redis, fleet.prefix)).toMatchObject({ consecutive: 0, windowFailures: 0 });
    expect((await breakerRecord(redis, fleet.prefix)).state ?? 'c').toBe('c');
    expect(await readyzOf(a)).toBe(200);
    expect(await readyzOf(b)).toBe(200);
    // The attacker's device is told what the upstream said.
    for (const { status, reply } of attackerReplies) {
      expect(reply).toMatchObject({ ok: false, error: { code: 'invalid_request' } });
      expect(reply?.ok === false && reply.error.message).toContain(`the upstream refused the request: ${status}`);
    }
  });
});
