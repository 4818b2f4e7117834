// The plant's namespace end to end: a template with `output` answered by a device's request is
// published retained at QoS 1 under the UNS root, read by an observer that subscribes after the
// answers (both broker modes); a failure keeps the last good data marked bad; an unmapped
// device goes under `unassigned`; a device cannot publish under the root; a fleet on Redis
// keeps the last good data when another instance answers the failure. Every observer's
// messages (topic, payload, retain flag) also go through scada-sim's checker: no violation.
// Needs replies to carry `data` for templates with `output` (the typed answer).
import { writeFileSync } from 'node:fs';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { UnsPayloadSchema, type Reply, type UnsPayload } from '../../contract/index.js';
import { SessionChecker } from '../../scada-sim/check.js';
import { startFleet, type Fleet } from '../helpers/fleet.js';
import { BROKER_MODES, okOf, startHarness, type BrokerMode, type Device, type Harness } from '../helpers/harness.js';
import { disconnectedWithin, tempDir, writeAuthFile } from '../helpers/security.js';
import { eventually } from '../helpers/wait.js';

const ROOT = 'acme/plant-1';
const INSPECT = {
  messages: [{ role: 'user', content: 'Part {{part}}: is it a reject? Burr height in mm.' }],
  temperature: 0,
  output: {
    type: 'object',
    properties: { reject: { type: 'boolean' }, burr_mm: { type: 'number', minimum: 0 } },
    required: ['reject', 'burr_mm'],
  },
};
const ANSWER = { reject: true, burr_mm: 0.31 };
const SCADA_USER = { username: 'scada', password: 'pw-scada-observer' };

const dir = tempDir('eab-uns-');
afterAll(() => dir.remove());

function writeConfig(): { CONFIG_FILE: string } {
  const path = `${dir.path}/config.json`;
  writeFileSync(path, JSON.stringify({ templates: { inspect: INSPECT }, uns: { root: ROOT, devices: { 'press-*': 'stamping/line-3' } } }));
  return { CONFIG_FILE: path };
}

/** Embedded: an AUTH_FILE with the SCADA observer, devices anonymous. External: the test Mosquitto lets anyone read. */
async function envFor(mode: BrokerMode): Promise<Record<string, string>> {
  const base = { ...writeConfig(), MAX_ATTEMPTS: '1', CACHE_TTL_S: '0' };
  if (mode === 'external') return base;
  const authFile = `${dir.path}/auth.json`;
  await writeAuthFile(authFile, [{ ...SCADA_USER, role: 'observer' }]);
  return { ...base, AUTH_FILE: authFile, ALLOW_ANONYMOUS: 'true' };
}

const completion = (content: string) => ({
  status: 200,
  body: {
    id: 'chatcmpl-uns',
    object: 'chat.completion',
    model: 'gpt-4o-mini-2024-07-18',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 20, completion_tokens: 9, total_tokens: 29 },
  },
});
const FAILURE = { status: 400, body: { error: { message: 'scripted failure', type: 'invalid_request_error' } } };

const clients: MqttClient[] = [];
/** One checker per observer, as each SCADA client judges what it received. */
const checkers: SessionChecker[] = [];
let h: Harness | undefined;
let fleet: Fleet | undefined;
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.endAsync(true)));
  checkers.splice(0);
  await h?.close();
  h = undefined;
  await fleet?.close();
  fleet = undefined;
});

async function connect(url: string, options: IClientOptions): Promise<MqttClient> {
  const client = await mqtt.connectAsync(url, { reconnectPeriod: 0, ...options });
  clients.push(client);
  return client;
}

/**
 * What an observer subscribing to the whole root now receives (retained tags first). MQTT 5
 * with Retain As Published, as scada-sim subscribes: a live tag says it was published retained.
 */
async function observe(url: string, mode: BrokerMode, clientId: string): Promise<IPublishPacket[]> {
  const client = await connect(url, { clientId, protocolVersion: 5, ...(mode === 'embedded' ? SCADA_USER : {}) });
  const packets: IPublishPacket[] = [];
  const checker = new SessionChecker({ unsRoot: ROOT });
  checkers.push(checker);
  client.on('message', (topic, payload, packet) => {
    checker.feed(topic, payload, packet.retain);
    packets.push(packet);
  });
  const granted = await client.subscribeAsync(`${ROOT}/#`, { qos: 1, rap: true });
  expect(granted[0]?.qos).toBe(1);
  return packets;
}

/** No observer's checker saw a broken UNS contract (an invalid or a non-retained tag). */
const expectSound = (): void => expect(checkers.flatMap((c) => c.violations)).toEqual([]);

const payloadOf = (packet: IPublishPacket | undefined): UnsPayload => UnsPayloadSchema.strict().parse(JSON.parse(String(packet?.payload)));
const topicOf = (place: string, deviceId: string) => `${ROOT}/${place}/${deviceId}/ai/inspect`;

async function inspect(device: Device, id: string): Promise<Reply> {
  await device.publish('normal', { id, template: 'inspect', vars: { part: id } });
  return (await device.reply(id))[0] as Reply;
}

/** The latest payload on `topic` among `packets`, once its request id is `requestId`. */
async function latestOn(packets: IPublishPacket[], topic: string, requestId: string): Promise<IPublishPacket> {
  const last = (): IPublishPacket | undefined => packets.filter((p) => p.topic === topic).at(-1);
  await eventually(`${requestId} on ${topic}`, () => last() !== undefined && payloadOf(last()).requestId === requestId);
  return last() as IPublishPacket;
}

describe.each(BROKER_MODES)('UNS (%s broker)', (mode) => {
  it('publishes typed answers retained at QoS 1 under the root; a failure keeps the last good data marked bad', async () => {
    h = await startHarness(await envFor(mode), {}, undefined, { mode });
    const live = await observe(h.url, mode, 'scada-live');
    const press = await h.device('press-1');
    const robot = await h.device('robot-9');

    h.upstream.script(completion(JSON.stringify(ANSWER)));
    const before = Date.now();
    const good = okOf(await inspect(press, 'r-good'));
    expect(good.data).toEqual(ANSWER);
    await latestOn(live, topicOf('stamping/line-3', 'press-1'), 'r-good');

    const late = await observe(h.url, mode, 'scada-late');
    await eventually('the retained tag', () => late.length === 1);
    const [tag] = late;
    expect(tag?.topic).toBe(topicOf('stamping/line-3', 'press-1'));
    expect(tag?.retain).toBe(true);
    expect(tag?.qos).toBe(1);
    const payload = payloadOf(tag);
    expect(payload).toEqual({
      data: ANSWER,
      quality: 'good',
      timestamp: payload.timestamp,
      requestId: 'r-good',
      model: good.model,
      latencyMs: Math.round(good.timing.total_ms),
    });
    expect(payload.timestamp).toBeGreaterThanOrEqual(before);
    expect(payload.timestamp).toBeLessThanOrEqual(Date.now());

    h.upstream.script(FAILURE);
    const failed = await inspect(press, 'r-bad');
    if (failed.ok) throw new Error('expected the scripted failure');
    h.upstream.script(FAILURE);
    const unmapped = await inspect(robot, 'r-robot');
    if (unmapped.ok) throw new Error('expected the scripted failure');
    await latestOn(live, topicOf('stamping/line-3', 'press-1'), 'r-bad');
    await latestOn(live, topicOf('unassigned', 'robot-9'), 'r-robot');

    const after = await observe(h.url, mode, 'scada-after');
    await eventually('both retained tags', () => after.length === 2);
    const byTopic = new Map(after.map((p) => [p.topic, p]));
    expect([...byTopic.values()].every((p) => p.retain && p.qos === 1)).toBe(true);
    const bad = payloadOf(byTopic.get(topicOf('stamping/line-3', 'press-1')));
    expect(bad).toEqual({ data: ANSWER, quality: 'bad', timestamp: bad.timestamp, requestId: 'r-bad', error: failed.error.code });
    const robotTag = payloadOf(byTopic.get(topicOf('unassigned', 'robot-9')));
    expect(robotTag).toEqual({ quality: 'bad', timestamp: robotTag.timestamp, requestId: 'r-robot', error: unmapped.error.code });
    // The tag table SCADA builds from the retained tags alone.
    const rows = checkers
      .at(-1)
      ?.table()
      .map((t) => [t.source, t.metric, t.value, t.quality]);
    expect(rows).toEqual([
      [topicOf('stamping/line-3', 'press-1'), 'burr_mm', ANSWER.burr_mm, 'bad'],
      [topicOf('stamping/line-3', 'press-1'), 'reject', ANSWER.reject, 'bad'],
      [topicOf('unassigned', 'robot-9'), 'error', unmapped.error.code, 'bad'],
    ]);
    expectSound();
  });
});

describe('UNS on the embedded broker', () => {
  it('lets no device publish under the root: it is disconnected and the tag stays', async () => {
    h = await startHarness(await envFor('embedded'));
    const press = await h.device('press-1');
    h.upstream.script(completion(JSON.stringify(ANSWER)));
    okOf(await inspect(press, 'r-1'));
    const live = await observe(h.url, 'embedded', 'scada-live');
    await eventually('the retained tag', () => live.length === 1);

    const forger = await connect(h.url, { clientId: 'press-1.forger' });
    const closed = disconnectedWithin(forger, 2000);
    const fake = JSON.stringify({ data: { reject: false, burr_mm: 0 }, quality: 'good', timestamp: Date.now(), requestId: 'forged' });
    forger.publish(topicOf('stamping/line-3', 'press-1'), fake, { qos: 1, retain: true });
    expect(await closed).toBe(true);
    const after = await observe(h.url, 'embedded', 'scada-after');
    await eventually('the retained tag', () => after.length === 1);
    expect(payloadOf(after[0]).requestId).toBe('r-1');
    expect(live).toHaveLength(1);
    expectSound();
  });
});

describe('UNS across a Redis fleet', () => {
  it('keeps the last good data when another instance answers the failure', async () => {
    fleet = await startFleet(0, {});
    const env = await envFor('embedded');
    const a = await fleet.add(env);
    const b = await fleet.add(env);
    const pressA = await a.device('press-1');
    fleet.upstream.script(completion(JSON.stringify(ANSWER)));
    okOf(await inspect(pressA, 'r-good'));
    const live = await observe(b.url, 'embedded', 'scada-live');
    await latestOn(live, topicOf('stamping/line-3', 'press-1'), 'r-good');
    await pressA.close();
    await fleet.stop(a);

    // Only b is left to answer, with nothing of the good answer in its own memory.
    const pressB = await b.device('press-1');
    fleet.upstream.script(FAILURE);
    const failed = await inspect(pressB, 'r-bad');
    if (failed.ok) throw new Error('expected the scripted failure');
    const tag = await latestOn(live, topicOf('stamping/line-3', 'press-1'), 'r-bad');
    expect(payloadOf(tag)).toMatchObject({ data: ANSWER, quality: 'bad', requestId: 'r-bad', error: failed.error.code });
    expectSound();
  });
});
