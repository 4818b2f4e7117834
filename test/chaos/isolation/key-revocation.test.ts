// Isolation: gateways answer 403 for a model an API key may not use, and devices choose the
// model. Such refusals fail the requests that named that model (invalid_request) and leave the
// key in rotation; an innocent device on the same instance is answered within 5 s and /readyz
// stays 200. A key that is really revoked is set aside once a probe with it (GET /models) is
// refused too, and /readyz turns 503 when no provider has a key left.
import { afterEach, describe, expect, it } from 'vitest';
import { ask, startHarness, type Harness } from '../../helpers/harness.js';
import { readyzOf } from './upstream-blame.js';

const KEYS = ['sk-iso-key-one', 'sk-iso-key-two'];
const RESTRICTED = 'gpt-restricted';

describe('isolation: a device naming a model the API keys may not use', () => {
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('gets refusals alone; the keys stay in rotation until one is really revoked', { timeout: 30_000 }, async () => {
    h = await startHarness(
      { UPSTREAM_API_KEYS: KEYS.join(','), MAX_ATTEMPTS: '3', DEVICE_RATE_LIMIT_RPM: '100000' },
      { refusedModels: KEYS.map((key) => ({ key, model: RESTRICTED })) },
    );
    const attacker = await h.device('attacker');
    const innocent = await h.device('innocent');

    const ids = Array.from({ length: 10 }, (_, i) => `att-${i}`);
    await Promise.all(ids.map((id) => attacker.publish('normal', ask(id, id, { model: RESTRICTED }))));
    const attackerReplies = await Promise.all(ids.map(async (id) => (await attacker.reply(id, { timeoutMs: 10_000 }))[0]));

    // Both keys still serve the innocent device.
    const before = h.upstream.requests.length;
    for (let i = 0; i < 4; i += 1) {
      const started = Date.now();
      await innocent.publish('critical', ask(`inn-${i}`));
      const [reply] = await innocent.reply(`inn-${i}`, { timeoutMs: 5000 });
      expect(reply).toMatchObject({ id: `inn-${i}`, ok: true });
      expect(Date.now() - started).toBeLessThan(5000);
    }
    const used = new Set(h.upstream.requests.slice(before).map((r) => r.headers['authorization']));
    expect([...used].sort()).toEqual(KEYS.map((k) => `Bearer ${k}`));
    expect(await readyzOf(h)).toBe(200);
    // The attacker's requests failed alone: refused, no retry on the other key, one probe per key at most.
    for (const reply of attackerReplies) {
      expect(reply).toMatchObject({ ok: false, error: { code: 'invalid_request' } });
      expect(reply?.ok === false && reply.error.message).toContain('the upstream refused the request: 403');
    }
    expect(h.upstream.stats().byStatus['403']).toBe(ids.length);
    expect(h.upstream.stats().byPath['/v1/models'] ?? 0).toBeLessThanOrEqual(KEYS.length);

    // Now the keys are really revoked: each is probed, refused, set aside; readiness follows.
    h.upstream.setOptions({ revokedKeys: KEYS });
    await innocent.publish('critical', ask('inn-revoked'));
    const [revoked] = await innocent.reply('inn-revoked', { timeoutMs: 5000 });
    expect(revoked).toMatchObject({ ok: false, error: { code: 'upstream_error' } });
    // Set aside before the reply was sent: no wait is needed.
    const ready = await fetch(`http://127.0.0.1:${h.bridge.httpPort}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ ready: false, providers: [{ name: 'primary', circuit: 'closed', available: false, usableKeys: 0 }] });
    expect(h.upstream.stats().byPath['/v1/models']).toBeGreaterThanOrEqual(KEYS.length);
  });
});
