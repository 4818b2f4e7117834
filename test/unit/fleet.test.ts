import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Aedes, type AedesPublishPacket } from 'aedes';
import { parseInferTopic, topics, type ErrorReply, type OkReply } from '../../contract/index.js';
import { runFleet, type FleetOptions } from '../../device-sim/fleet.js';

type Decision = 'ok' | 'drop' | 'error' | 'twice';

interface Responder {
  url: string;
  received: { deviceId: string; id: string; qos: number }[];
  clients: () => number;
  close: () => Promise<void>;
}

/** A bare aedes broker that answers each request itself, standing in for the bridge. */
async function startResponder(decide: (id: string, n: number) => Decision = () => 'ok'): Promise<Responder> {
  const broker = await Aedes.createBroker();
  const server: Server = createServer(broker.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const received: Responder['received'] = [];

  const publish = (topic: string, body: unknown): void => {
    broker.publish({ cmd: 'publish', topic, payload: Buffer.from(JSON.stringify(body)), qos: 1, retain: false, dup: false }, () => {});
  };

  broker.subscribe(
    topics.inferWildcard,
    (packet: AedesPublishPacket, cb: () => void) => {
      const parsed = parseInferTopic(packet.topic);
      if (parsed?.kind === 'infer') {
        const req = JSON.parse(packet.payload.toString()) as { id: string };
        received.push({ deviceId: parsed.deviceId, id: req.id, qos: packet.qos });
        const decision = decide(req.id, received.length);
        const ok: OkReply = {
          id: req.id,
          ok: true,
          model: 'sim-model',
          content: 'fine',
          finish_reason: 'stop',
          cached: false,
          attempts: 1,
          priority: parsed.priority,
          timing: { queued_ms: 0, upstream_ms: 1, total_ms: 1 },
        };
        const err: ErrorReply = { id: req.id, ok: false, priority: parsed.priority, error: { code: 'queue_full', message: 'full' } };
        const result = topics.result(parsed.deviceId);
        if (decision === 'ok' || decision === 'twice') publish(result, ok);
        if (decision === 'twice') {
          publish(result, ok);
          // A reply for an id this device never sent must be ignored too.
          publish(result, { ...ok, id: `${req.id}-stranger` });
        }
        if (decision === 'error') publish(result, err);
      }
      cb();
    },
    () => {},
  );

  return {
    url: `mqtt://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    clients: () => broker.connectedClients,
    close: async () => {
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const responders: Responder[] = [];
afterEach(async () => {
  await Promise.all(responders.splice(0).map((r) => r.close()));
});

async function responder(decide?: (id: string, n: number) => Decision): Promise<Responder> {
  const r = await startResponder(decide);
  responders.push(r);
  return r;
}

function options(url: string, over: Partial<FleetOptions> = {}): FleetOptions {
  return {
    url,
    devices: 5,
    rate: 50,
    durationS: 1,
    mix: { critical: 1, high: 9, normal: 80, low: 10 },
    qos: 1,
    replyTimeoutMs: 2000,
    connectConcurrency: 2,
    seed: 42,
    ...over,
  };
}

describe('runFleet', () => {
  it('sends at the fleet rate round-robin and matches every reply', async () => {
    const r = await responder();
    const t0 = Date.now();
    const report = await runFleet(options(r.url));
    const elapsed = Date.now() - t0;

    expect(report.overall).toMatchObject({ sent: 50, ok: 50, errors: {}, lost: 0 });
    expect(report.overall.latencyMs?.max).toBeLessThan(1000);
    expect(report.overall.achievedRate).toBeGreaterThan(35);
    expect(report.durationS).toBeGreaterThan(0.9);
    expect(report.durationS).toBeLessThan(1.5);
    expect(elapsed).toBeLessThan(2500);

    // Round robin: ten requests per device, ids unique and `${deviceId}-${seq}`.
    const perDevice = new Map<string, number>();
    for (const m of r.received) perDevice.set(m.deviceId, (perDevice.get(m.deviceId) ?? 0) + 1);
    expect([...perDevice.keys()].sort()).toEqual(['sim-1', 'sim-2', 'sim-3', 'sim-4', 'sim-5']);
    expect([...perDevice.values()]).toEqual([10, 10, 10, 10, 10]);
    expect(new Set(r.received.map((m) => m.id)).size).toBe(50);
    expect(r.received.every((m) => m.id.startsWith(`${m.deviceId}-`) && m.qos === 1)).toBe(true);

    const byPriority = Object.values(report.byPriority);
    expect(byPriority.reduce((a, row) => a + row.sent, 0)).toBe(50);
    expect(report.byPriority.normal.sent).toBeGreaterThan(report.byPriority.critical.sent);
    expect(report.config).toMatchObject({ devices: 5, rate: 50, qos: 1, prefix: 'sim' });

    // Every connection was ended.
    await expect.poll(() => r.clients()).toBe(0);
  });

  it('counts duplicates once, ignores unknown ids and tallies error codes', async () => {
    const r = await responder((_id, n) => (n % 5 === 0 ? 'error' : n % 2 === 0 ? 'twice' : 'ok'));
    const report = await runFleet(options(r.url, { devices: 3, rate: 40, durationS: 0.5, qos: 2, prefix: 'cam' }));
    expect(report.overall.sent).toBe(20);
    expect(report.overall.errors).toEqual({ queue_full: 4 });
    expect(report.overall.ok).toBe(16);
    expect(report.overall.lost).toBe(0);
    expect(r.received[0]?.deviceId).toBe('cam-1');
    expect(r.received.every((m) => m.qos === 2)).toBe(true);
  });

  it('counts dropped requests as lost and waits only replyTimeoutMs for them', async () => {
    const r = await responder((_id, n) => (n % 4 === 0 ? 'drop' : 'ok'));
    const t0 = Date.now();
    const report = await runFleet(options(r.url, { rate: 40, durationS: 0.5, replyTimeoutMs: 400, qos: 0, mix: { critical: 0, high: 0, normal: 1, low: 0 } }));
    const elapsed = Date.now() - t0;

    expect(report.overall).toMatchObject({ sent: 20, ok: 15, lost: 5 });
    expect(report.byPriority.normal).toMatchObject({ sent: 20, ok: 15, lost: 5 });
    expect(report.byPriority.critical.sent).toBe(0);
    // About 0.5 s sending + 0.4 s waiting, plus connects; never the 60 s default.
    expect(elapsed).toBeGreaterThanOrEqual(850);
    expect(elapsed).toBeLessThan(2500);
    // Duration is measured to the last reply, not to the end of the wait.
    expect(report.durationS).toBeLessThan(0.8);
  });

  it('fails fast when the broker is unreachable', async () => {
    const r = await responder();
    const url = r.url;
    await r.close();
    responders.length = 0;
    await expect(runFleet(options(url, { devices: 2 }))).rejects.toThrow(/sim-/);
  });

  it('rejects invalid options', async () => {
    await expect(runFleet(options('mqtt://127.0.0.1:1', { devices: 0 }))).rejects.toThrow(/--devices/);
  });
});
