// Isolation, finding "a CBOR bignum freezes the event loop": an MQTT 5 device sends one request
// with Content Type application/cbor holding tag 2 (a bignum) around a 262 KB byte string, which
// cbor-x alone rebuilds into a BigInt in quadratic time (seconds to minutes of one blocked
// loop). The running bridge (a process of its own, Redis store) must refuse it before decoding:
// the attacker gets invalid_request naming the tag, /healthz and /readyz answer at once, and an
// innocent device's request sent right behind the attack is answered ok within 3 s.
import { decode } from 'cbor-x';
import mqtt, { type IPublishPacket } from 'mqtt';
import { describe, expect, it } from 'vitest';
import { startServiceProcess } from '../../../device-sim/service-process.js';
import { startUpstreamSim } from '../../../upstream-sim/sim.js';
import { chaosScene, connectChaosDevice, readyz, waitUntil } from '../../helpers/chaos.js';
import { connectRedis, REDIS_URL, uniquePrefix } from '../../helpers/redis.js';

const redis = connectRedis();
const scene = chaosScene(redis);
/** The innocent device's bound: a few seconds, where the attack held the loop for many. */
const INNOCENT_BOUND_MS = 3000;
const BIGNUM_BYTES = 262_000;

/** `{"id": id, "v": tag 2 (bignum) around BIGNUM_BYTES bytes}`, under MAX_PAYLOAD_BYTES (262 144). */
function bignumRequest(id: string): Buffer {
  const head = Buffer.concat([Buffer.from([0xa2, 0x62, 0x69, 0x64, 0x60 + id.length]), Buffer.from(id), Buffer.from([0x61, 0x76, 0xc2, 0x5a, 0, 0, 0, 0])]);
  head.writeUInt32BE(BIGNUM_BYTES, head.length - 4);
  return Buffer.concat([head, Buffer.alloc(BIGNUM_BYTES, 0xff)]);
}

/** GET /healthz: its status, or 0 when it did not answer within `timeoutMs`. */
async function healthz(httpPort: number, timeoutMs: number): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${httpPort}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

describe('isolation: a CBOR bignum', () => {
  it('is refused before decoding; the bridge stays responsive and serves an innocent device', { timeout: 60_000 }, async () => {
    const prefix = (scene.prefix = uniquePrefix('iso-cbor'));
    const upstream = (scene.upstream = await startUpstreamSim({ port: 0, latencyMs: 20 }));
    const bridge = await startServiceProcess({ REDIS_URL, REDIS_PREFIX: prefix, UPSTREAM_URL: upstream.url, OVERLOAD_DELAY_MS: '0' });
    scene.services.push(bridge);
    const innocent = await connectChaosDevice(bridge.mqttPort, 'iso-cbor-innocent', { clean: true, reconnectPeriod: 0 });
    scene.devices.push(innocent);
    const attacker = await mqtt.connectAsync(`mqtt://127.0.0.1:${bridge.mqttPort}`, { clientId: 'iso-cbor-attacker', protocolVersion: 5, reconnectPeriod: 0 });
    scene.closers.push(() => attacker.endAsync(true));
    const attackerReplies: IPublishPacket[] = [];
    attacker.on('message', (_topic, _payload, packet) => attackerReplies.push(packet));
    await attacker.subscribeAsync('devices/iso-cbor-attacker/result', { qos: 1 });
    expect(await readyz(bridge.httpPort)).toBe(200);

    // The attack: once its last byte is on the wire, the innocent device asks and /healthz is probed.
    const attackWritten = new Promise<void>((resolve) => attacker.on('packetsend', (packet) => packet.cmd === 'publish' && resolve()));
    const puback = attacker
      .publishAsync('devices/iso-cbor-attacker/infer/normal', bignumRequest('big-1'), { qos: 1, properties: { contentType: 'application/cbor' } })
      .then(
        () => 0,
        (err: { code?: number }) => err.code ?? -1,
      );
    await attackWritten;
    const askedAt = Date.now();
    innocent.publish('normal', { id: 'innocent-1', messages: [{ role: 'user', content: 'innocent-1' }] }).catch(() => undefined); // its PUBACK is not the point
    expect(await healthz(bridge.httpPort, 1000)).toBe(200);

    const served = await waitUntil(() => innocent.replies.some((r) => r.id === 'innocent-1'), INNOCENT_BOUND_MS);
    const answer = innocent.replies.find((r) => r.id === 'innocent-1');
    expect({ served, ok: answer?.ok, withinMs: answer ? answer.at - askedAt : undefined }).toMatchObject({ served: true, ok: true });
    expect(answer!.at - askedAt).toBeLessThan(INNOCENT_BOUND_MS);
    expect(await readyz(bridge.httpPort)).toBe(200);

    // The attacker: PUBACK 0x99 (payload format invalid), and a CBOR error reply naming its request and the tag.
    expect(await puback).toBe(0x99);
    expect(await waitUntil(() => attackerReplies.length > 0, 2000)).toBe(true);
    expect(decode(attackerReplies[0]!.payload as Buffer)).toMatchObject({
      id: 'big-1',
      ok: false,
      error: { code: 'invalid_request', message: 'CBOR tags are not accepted (JSON cannot carry them)' },
    });
    // Nothing of the attack reached the upstream.
    expect(upstream.requests.map((r) => JSON.stringify(r.body)).filter((b) => !b.includes('innocent-1'))).toEqual([]);
  });
});
