// Isolation, finding "JSON depth": a request nesting an array 100 000 levels deep (200 KB, under
// MAX_PAYLOAD_BYTES) parses, but the recursive walks after parsing (the schema's check of a JSON
// schema, the cache key) overflowed the stack, and the device was answered `internal`, as a
// fault of the bridge. The running bridge (a process of its own, Redis store) must refuse it as the
// device's own error, `invalid_request` naming the limit and the request, before any of that
// work, while an innocent device is served and /readyz stays 200.
import { describe, expect, it } from 'vitest';
import { startServiceProcess } from '../../../device-sim/service-process.js';
import { startUpstreamSim } from '../../../upstream-sim/sim.js';
import { chaosScene, connectChaosDevice, readyz, waitUntil } from '../../helpers/chaos.js';
import { connectRedis, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';

const redis = connectRedis();
const scene = chaosScene(redis);
const DEPTH = 100_000;
const INNOCENT_BOUND_MS = 3000;
const deepArray = '['.repeat(DEPTH) + ']'.repeat(DEPTH);

/** Where a deep value may sit in a request: passed through to the upstream, or a field of its own. */
const attacks = {
  'deep-message': `{"id":"deep-message","messages":[{"role":"user","content":"x","name":${deepArray}}]}`,
  'deep-part': `{"id":"deep-part","messages":[{"role":"user","content":[{"type":"text","text":"x","extra":${deepArray}}]}]}`,
  'deep-schema': `{"id":"deep-schema","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${'{"a":'.repeat(DEPTH / 2.5)}1${'}'.repeat(DEPTH / 2.5)}}}}`,
};

describe('isolation: JSON nested 100 000 levels deep', () => {
  it('is refused as invalid_request naming the limit, not internal; an innocent device is served', { timeout: 60_000 }, async () => {
    const prefix = (scene.prefix = uniquePrefix('iso-depth'));
    const upstream = (scene.upstream = await startUpstreamSim({ port: 0, latencyMs: 20 }));
    const bridge = await startServiceProcess({ REDIS_URL, REDIS_PREFIX: prefix, UPSTREAM_URL: upstream.url, OVERLOAD_DELAY_MS: '0' });
    scene.services.push(bridge);
    const [attacker, innocent] = await Promise.all(
      ['iso-depth-attacker', 'iso-depth-innocent'].map((id) => connectChaosDevice(bridge.mqttPort, id, { clean: true, reconnectPeriod: 0 })),
    );
    scene.devices.push(attacker!, innocent!);

    for (const payload of Object.values(attacks)) {
      expect(Buffer.byteLength(payload)).toBeLessThan(262_144);
      await attacker!.client.publishAsync('devices/iso-depth-attacker/infer/normal', payload, { qos: 1 });
    }
    const askedAt = Date.now();
    await innocent!.publish('normal', { id: 'innocent-1', messages: [{ role: 'user', content: 'innocent-1' }] });

    expect(await waitUntil(() => innocent!.replies.some((r) => r.id === 'innocent-1'), INNOCENT_BOUND_MS)).toBe(true);
    const answer = innocent!.replies.find((r) => r.id === 'innocent-1')!;
    expect(answer.ok).toBe(true);
    expect(answer.at - askedAt).toBeLessThan(INNOCENT_BOUND_MS);

    expect(await waitUntil(() => attacker!.replies.length >= Object.keys(attacks).length, 5000)).toBe(true);
    const refusals = attacker!.replies.map((r) => ({
      id: r.id,
      code: r.code,
      message: (JSON.parse(r.raw) as { error?: { message?: string } }).error?.message,
    }));
    expect(refusals).toEqual(Object.keys(attacks).map((id) => ({ id, code: 'invalid_request', message: 'nesting deeper than 64 levels' })));
    expect(await readyz(bridge.httpPort)).toBe(200);
    expect(upstream.requests.map((r) => JSON.stringify(r.body)).filter((b) => !b.includes('innocent-1'))).toEqual([]);
    expect(bridge.logs.filter((l) => l.msg === 'intake failed')).toEqual([]);
  });
});
