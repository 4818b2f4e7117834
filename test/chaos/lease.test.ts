// Chaos: lock leases (docs/CONTRACT.md guarantee 6). (a) a holder whose work
// outlives one lease keeps its lock by renewing it; (b) a holder that stops renewing (SIGSTOP)
// loses the lock once its lease runs out, the next grant carries a larger fence, and the
// stopped holder starts no further attempt when it wakes up.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { leaseMsFor } from '../../bridge/recovery/leases.js';
import { startServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type RecordedRequest, type UpstreamSim } from '../../upstream-sim/sim.js';
import { chaosScene, connectChaosDevice, waitUntil, type ChaosDevice } from '../helpers/chaos.js';
import { connectRedis, REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const redis = connectRedis();
const TIMEOUT_MS = 1500;
const LEASE_MS = leaseMsFor(TIMEOUT_MS); // the scheduler's lease

const scene = chaosScene(redis);

const fenceOf = (r: RecordedRequest): number => Number(r.headers['x-lock-fence']);
const contentOf = (r: RecordedRequest): unknown => (r.body as { messages: Array<{ content: unknown }> }).messages[0]?.content;
const lockRequest = (id: string, lock: string): unknown => ({ id, lock, messages: [{ role: 'user', content: id }] });
const replyFor = (d: ChaosDevice, id: string) => d.replies.find((r) => r.id === id);

function envFor(up: UpstreamSim, extra: Record<string, string> = {}): Record<string, string> {
  return {
    REDIS_URL,
    REDIS_PREFIX: scene.prefix,
    UPSTREAM_URL: up.url,
    UPSTREAM_TIMEOUT_MS: String(TIMEOUT_MS),
    RATE_LIMIT_RPM: '100000',
    DEVICE_RATE_LIMIT_RPM: '100000',
    ...extra,
  };
}

describe('chaos: lock leases', () => {
  it('(a) a job whose retries outlive one lease keeps its lock by renewal', { timeout: 30_000 }, async () => {
    scene.prefix = uniquePrefix('chaos-lease-a');
    const upstream = (scene.upstream = await startUpstreamSim({ port: 0, latencyMs: 200 }));
    // Five timed-out attempts (5 × 1.5 s plus backoff) hold the lock well past one lease (4.5 s);
    // the sixth attempt is answered.
    upstream.script({ hang: true }, { hang: true }, { hang: true }, { hang: true }, { hang: true });
    // Five timeouts in a row would open the provider's circuit breaker (default: 5 consecutive
    // failures) and fail the sixth attempt fast; this test is about the lease, so raise it.
    const configDir = mkdtempSync(join(tmpdir(), 'chaos-lease-'));
    const configFile = join(configDir, 'config.json');
    writeFileSync(configFile, JSON.stringify({ breaker: { consecutiveFailures: 10 } }));
    const service = await startServiceProcess(envFor(upstream, { MAX_ATTEMPTS: '6', CONFIG_FILE: configFile }));
    scene.services.push(service);
    const tag = randomBytes(3).toString('hex');
    const device = await connectChaosDevice(service.mqttPort, `lease-${tag}`, { clean: true, reconnectPeriod: 0 });
    scene.devices.push(device);
    const lock = `line-${tag}/arm`;

    await device.publish('normal', lockRequest('first', lock));
    await waitUntil(() => upstream.requests.length >= 1, 5000);
    await device.publish('normal', lockRequest('second', lock));

    const done = await waitUntil(() => replyFor(device, 'first') !== undefined && replyFor(device, 'second') !== undefined, 20_000);
    const first = upstream.requests.filter((r) => contentOf(r) === 'first');
    const second = upstream.requests.filter((r) => contentOf(r) === 'second');
    const firstReply = replyFor(device, 'first');
    const heldMs = (first.at(-1)?.at ?? 0) - (first[0]?.at ?? 0);
    console.log(
      `[chaos lease a] first: ${first.length} calls over ${heldMs} ms (lease ${LEASE_MS} ms), fences ${first.map(fenceOf).join(',')}, ` +
        `reply ${firstReply?.raw}; second: ${second.length} calls, fence ${second.map(fenceOf).join(',')}, ` +
        `${second[0] && first.at(-1) ? second[0].at - first.at(-1)!.at : NaN} ms after first's last call`,
    );
    expect(done).toBe(true);
    expect(first).toHaveLength(6);
    expect(heldMs).toBeGreaterThan(LEASE_MS); // the lock outlived its first lease
    expect(new Set(first.map(fenceOf)).size).toBe(1); // one grant for all of its attempts
    expect(firstReply).toMatchObject({ ok: true });
    expect(replyFor(device, 'second')).toMatchObject({ ok: true });
    expect(second).toHaveLength(1);
    // The second never reached the upstream while the first held the lock: not before the
    // first's last call was answered (200 ms latency).
    expect(second[0]!.at).toBeGreaterThanOrEqual(first.at(-1)!.at + 150);
    expect(fenceOf(second[0]!)).toBeGreaterThan(fenceOf(first[0]!));
  });

  it('(b) a stopped holder loses the lock after its lease, and the next grant has a larger fence', { timeout: 30_000 }, async () => {
    scene.prefix = uniquePrefix('chaos-lease-b');
    const upstream = (scene.upstream = await startUpstreamSim({ port: 0, latencyMs: 100 }));
    upstream.script({ hang: true }); // A's call never returns while A is stopped
    const env = envFor(upstream);
    const a = await startServiceProcess(env);
    scene.services.push(a);
    const tag = randomBytes(3).toString('hex');
    const lock = `line-${tag}/arm`;
    const deviceA = await connectChaosDevice(a.mqttPort, `lease-${tag}`, { clean: false, reconnectPeriod: 0 });
    scene.devices.push(deviceA);

    await deviceA.publish('normal', lockRequest('held-by-a', lock));
    expect(await waitUntil(() => upstream.requests.length >= 1, 5000)).toBe(true);
    const aCall = upstream.requests[0]!;
    a.child.kill('SIGSTOP'); // A holds the lock and stops renewing it
    const stoppedAt = Date.now();

    // B starts only now, so it could not have claimed A's request itself.
    const b = await startServiceProcess(env);
    scene.services.push(b);
    const deviceB = await connectChaosDevice(b.mqttPort, `lease-${tag}.b`, { clean: true, reconnectPeriod: 0 });
    scene.devices.push(deviceB);
    await deviceB.publish('normal', lockRequest('sent-to-b', lock));

    const granted = await waitUntil(() => replyFor(deviceB, 'sent-to-b') !== undefined, 20_000);
    const bCall = upstream.requests.find((r) => contentOf(r) === 'sent-to-b');

    // A wakes up: its call times out at once, and its renewal finds the lease gone; it must
    // start no further attempt with its stale fence.
    a.child.kill('SIGCONT');
    const callsBeforeWake = upstream.requests.length;
    // A's run ends there: it logs the lost lease instead of an attempt (a stale attempt would come before).
    const leaseLost = await waitUntil(() => a.logs.some((l) => typeof l.msg === 'string' && l.msg.startsWith('lease lost before')), 5000);
    const afterWake = upstream.requests.slice(callsBeforeWake);
    const staleAfterWake = afterWake.filter((r) => fenceOf(r) <= fenceOf(aCall));
    // A's own request, answered by B, reaches its device through A once A runs again.
    const aAnswered = await waitUntil(() => replyFor(deviceA, 'held-by-a') !== undefined, 5000);
    // Read only now: B may be granted the lock for its own request before it reaps A's.
    const takeover = upstream.requests.filter((r) => contentOf(r) === 'held-by-a').slice(1);

    console.log(
      `[chaos lease b] A's call fence ${fenceOf(aCall)} at +0 ms; A stopped at +${stoppedAt - aCall.at} ms; ` +
        `A's request taken over: ${takeover.map((r) => `fence ${fenceOf(r)} at +${r.at - aCall.at} ms`).join(', ') || 'no'}; ` +
        `B's request: ${bCall ? `fence ${fenceOf(bCall)} at +${bCall.at - aCall.at} ms` : 'never called'}, ` +
        `reply ${replyFor(deviceB, 'sent-to-b')?.raw}; calls after A woke: ${afterWake.length} (stale ${staleAfterWake.length}); ` +
        `A's request: ${deviceA.replies.filter((r) => r.id === 'held-by-a').length} replies, ${replyFor(deviceA, 'held-by-a')?.raw}`,
    );
    expect(granted).toBe(true);
    expect(replyFor(deviceB, 'sent-to-b')).toMatchObject({ ok: true });
    expect(bCall).toBeDefined();
    // Not granted before A's lease ran out: A's lease was renewed at the latest just before it
    // stopped, and at the earliest it was granted just before its call.
    expect(bCall!.at).toBeGreaterThanOrEqual(aCall.at + LEASE_MS - 200);
    expect(fenceOf(bCall!)).toBeGreaterThan(fenceOf(aCall));
    // Every grant after A's carries a larger fence, and A started nothing once it woke.
    for (const r of upstream.requests.slice(1)) expect(fenceOf(r)).toBeGreaterThan(fenceOf(aCall));
    expect(staleAfterWake).toEqual([]);
    expect(leaseLost).toBe(true);
    // A's own request was taken over by B (reaped, run again under a new grant).
    expect(takeover.length).toBeGreaterThanOrEqual(1);
    expect(aAnswered).toBe(true);
    expect(replyFor(deviceA, 'held-by-a')).toMatchObject({ ok: true });
  });
});
