// One adopted broker session against a real Mosquitto 2.0 (mqtt/adopt-session.ts): a member of a
// share group dies holding queued and unacknowledged requests; the adopter connects with its
// client id, leaves the group, hands every request to admission, and ends the session. When the
// member's own client id comes back mid-adoption, the adopter gives the session up and the
// member receives again what the adopter had not acknowledged.
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { InboundRequest } from '../../contract/index.js';
import { adoptSession, type AdoptSessionOptions } from '../../bridge/mqtt/adopt-session.js';
import { sharedSubscriptions } from '../../bridge/mqtt/external.js';
import { waitUntil } from '../helpers/wait.js';
import { startMosquitto, type Mosquitto } from '../helpers/mosquitto.js';

const GROUP = 'g';
const FILTERS = sharedSubscriptions(GROUP);
let mq: Mosquitto | undefined;
const clients: MqttClient[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.endAsync(true).catch(() => undefined)));
  await mq?.close();
  mq = undefined;
});

async function connect(clientId: string, options: IClientOptions = {}): Promise<{ client: MqttClient; sessionPresent: boolean }> {
  const client = mqtt.connect((mq as Mosquitto).url, {
    clientId,
    protocolVersion: 5,
    clean: false,
    reconnectPeriod: 0,
    properties: { sessionExpiryInterval: 300 },
    ...options,
  });
  clients.push(client);
  const connack = await new Promise<{ sessionPresent: boolean }>((resolve) => client.once('connect', resolve));
  return { client, sessionPresent: connack.sessionPresent };
}

/** A share group of `dead` and `live`; `dead` then dies without a DISCONNECT. Returns what `live` receives. */
async function groupWithADeadMember(): Promise<string[]> {
  mq = await startMosquitto();
  const { client: dead } = await connect('dead');
  const { client: live } = await connect('live');
  await dead.subscribeAsync(FILTERS[0] as string, { qos: 1 });
  await live.subscribeAsync(FILTERS[0] as string, { qos: 1 });
  const toLive: string[] = [];
  live.on('message', (_topic, payload) => toLive.push(payload.toString()));
  dead.stream.destroy();
  // Mosquitto notices the closed socket at once on loopback; the session stays, in the group.
  await new Promise((resolve) => setTimeout(resolve, 300));
  return toLive;
}

async function publish(ids: string[]): Promise<void> {
  const { client } = await connect(`pub-${ids[0]}`, { clean: true });
  for (const id of ids) await client.publishAsync('devices/cam-1/infer/normal', id, { qos: 1 });
}

const range = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `r${from + i}`);

function options(onRequest: AdoptSessionOptions['onRequest'], extra: Partial<AdoptSessionOptions> = {}): AdoptSessionOptions {
  return {
    clientId: 'dead',
    filters: FILTERS,
    sessionExpiryS: 300,
    onRequest,
    stillOurs: async () => true,
    signal: new AbortController().signal,
    quietMs: 300,
    log: pino({ level: 'silent' }),
    ...extra,
  };
}

const broker = (): { brokerUrl: string; brokerShareGroup: string; brokerSessionExpiryS: number } => ({
  brokerUrl: (mq as Mosquitto).url,
  brokerShareGroup: GROUP,
  brokerSessionExpiryS: 300,
});

describe('an adopted broker session (Mosquitto)', () => {
  it('admits what the dead member held, leaves the group and ends the session', { timeout: 20_000 }, async () => {
    const toLive = await groupWithADeadMember();
    await publish(range(0, 10));
    await waitUntil(() => toLive.length >= 5, 2000);
    const admitted: InboundRequest[] = [];
    const adopted = await adoptSession(
      broker(),
      options(async (request) => void admitted.push(request)),
    );
    const ids = admitted.map((r) => r.payload.toString());
    expect(adopted).toEqual({ outcome: 'ended', received: ids.length, sessionPresent: true });
    // Every request once, between the live member and the adopted session.
    expect([...toLive, ...ids].sort()).toEqual(range(0, 10).sort());
    expect(ids.length).toBeGreaterThan(0);
    expect(admitted.every((r) => r.redelivered === true && r.topic.deviceId === 'cam-1')).toBe(true);

    // Out of the group: the next requests all go to the live member.
    await publish(range(10, 16));
    expect(await waitUntil(() => toLive.length === 10 - ids.length + 6, 3000)).toBe(true);
    // Ended: the client id finds no session.
    expect((await connect('dead')).sessionPresent).toBe(false);
  });

  it('gives the session up when the member comes back, which receives again what was not acknowledged', { timeout: 20_000 }, async () => {
    await groupWithADeadMember();
    await publish(range(0, 10));
    let release: () => void = () => undefined;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const seen: string[] = [];
    const adoption = adoptSession(
      broker(),
      options(async (request) => {
        seen.push(request.payload.toString());
        await blocked; // the first admission never finishes before the member is back
      }),
    );
    expect(await waitUntil(() => seen.length === 1, 5000)).toBe(true);

    const received: Array<{ id: string; dup: boolean }> = [];
    const { client: back, sessionPresent } = await connect('dead', {
      customHandleAcks: (_topic, payload, packet, done) => {
        received.push({ id: payload.toString(), dup: packet.dup });
        done(0);
      },
    });
    const adopted = await adoption;
    release();
    expect(sessionPresent).toBe(true);
    expect(['taken_over', 'lost']).toContain(adopted.outcome);
    expect(adopted.received).toBe(1);
    // The request the adopter held unacknowledged comes again, marked DUP, with the rest.
    await waitUntil(() => received.length >= 2, 3000);
    expect(received.find((r) => r.id === seen[0])?.dup).toBe(true);
    // The adopter never reconnects: the member keeps its session.
    let closed = false;
    back.once('close', () => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(closed).toBe(false);
  });

  it('keeps the session when the claim is lost before it would end it', { timeout: 20_000 }, async () => {
    await groupWithADeadMember();
    await publish(range(0, 6));
    const adopted = await adoptSession(
      broker(),
      options(async () => undefined, { stillOurs: async () => false }),
    );
    expect(adopted.outcome).toBe('stopped');
    expect((await connect('dead')).sessionPresent).toBe(true);
  });
});
