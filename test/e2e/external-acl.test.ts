// The Mosquitto ACL recipe of docs/plant-broker.md for external-broker mode (BROKER_URL), with the real bridge
// in-process: devices log in with their device id as username and are confined to their own
// topics; the bridge's user reads every device's requests (through its shared subscription),
// writes results and response topics, and owns bridge/#; SCADA's user reads requests, results,
// streams and status and writes nothing. A bridge with wrong credentials does
// not start.
import { randomBytes } from 'node:crypto';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { startBridge } from '../../bridge/app.js';
import { loadConfig } from '../../bridge/config/config.js';
import { createLogger } from '../../bridge/logger.js';
import { ReplySchema, StatusSchema, topics, type Reply } from '../../contract/index.js';
import { waitUntil } from '../helpers/chaos.js';
import { ask, okOf, startHarness, type Harness } from '../helpers/harness.js';
import { PLANT_ACL } from '../helpers/mosquitto.js';

const ACL = [...PLANT_ACL];
const USERS = { 'cam-1': 'pw-cam-1', 'cam-2': 'pw-cam-2', bridge: 'pw-bridge', scada: 'pw-scada' };

let h: Harness | undefined;
const clients: MqttClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.endAsync(true)));
  await h?.close();
  h = undefined;
});

async function setup(): Promise<{ h: Harness; instanceId: string }> {
  const instanceId = `acl-${randomBytes(3).toString('hex')}`;
  h = await startHarness({ INSTANCE_ID: instanceId, BROKER_USERNAME: 'bridge', BROKER_PASSWORD: USERS.bridge }, {}, undefined, {
    mode: 'external',
    mosquitto: { users: USERS, acl: ACL },
  });
  return { h, instanceId };
}

interface Client {
  c: MqttClient;
  /** Every PUBLISH received, on any topic. */
  got: IPublishPacket[];
}

/** An MQTT 5 client logged in as `username`, its message listener in place before CONNACK. */
async function login(url: string, username: keyof typeof USERS, more: IClientOptions = {}): Promise<Client> {
  const c = mqtt.connect(url, {
    protocolVersion: 5,
    clientId: `${username}-${randomBytes(3).toString('hex')}`,
    username,
    password: USERS[username],
    reconnectPeriod: 0,
    ...more,
  });
  clients.push(c);
  const got: IPublishPacket[] = [];
  c.on('message', (_topic, _payload, packet) => got.push(packet));
  await new Promise<void>((resolve, reject) => {
    c.once('connect', () => resolve());
    c.once('error', reject);
  });
  return { c, got };
}

const on = (client: Client, topic: string): IPublishPacket[] => client.got.filter((p) => p.topic === topic);
const replyOf = (packet: IPublishPacket | undefined): Reply => ReplySchema.parse(JSON.parse(packet?.payload.toString() ?? 'null'));
const contents = (harness: Harness): unknown[] =>
  harness.upstream.requests.map((r) => (r.body as { messages?: Array<{ content?: unknown }> } | null)?.messages?.[0]?.content);

describe('external broker: the Mosquitto ACL recipe', () => {
  it('answers cam-1 on its result, stream and response topics; cam-2 subscribed to devices/cam-1/# gets none of it', async () => {
    const { h } = await setup();
    const cam1 = await login(h.url, 'cam-1');
    const cam2 = await login(h.url, 'cam-2');
    await cam1.c.subscribeAsync(['devices/cam-1/result', 'devices/cam-1/stream', 'devices/cam-1/rpc/#'], { qos: 1 });
    // Mosquitto 2.0 grants the subscription; the ACL filters each delivery.
    await cam2.c.subscribeAsync(['devices/cam-1/#', 'devices/cam-2/result'], { qos: 1 });

    const correlationData = Buffer.from('corr-1');
    await cam1.c.publishAsync('devices/cam-1/infer/normal', JSON.stringify(ask('q1', 'from cam-1', { stream: true })), {
      qos: 1,
      properties: { responseTopic: 'devices/cam-1/rpc/x', correlationData },
    });
    await waitUntil(() => on(cam1, 'devices/cam-1/result').length > 0 && on(cam1, 'devices/cam-1/rpc/x').length > 0, 5000, 10);
    const onResult = replyOf(on(cam1, 'devices/cam-1/result')[0]);
    const onRpc = on(cam1, 'devices/cam-1/rpc/x')[0];
    expect(okOf(onResult)).toMatchObject({ id: 'q1', content: 'sim answer to: from cam-1' });
    expect(replyOf(onRpc)).toEqual(onResult);
    expect(onRpc?.properties?.correlationData?.toString()).toBe('corr-1');

    // cam-2's own request, answered after cam-1's: its subscriptions are live by then.
    await cam2.c.publishAsync('devices/cam-2/infer/normal', JSON.stringify(ask('q2', 'from cam-2')), { qos: 1 });
    await waitUntil(() => on(cam2, 'devices/cam-2/result').length > 0, 5000, 10);
    expect(okOf(replyOf(on(cam2, 'devices/cam-2/result')[0])).id).toBe('q2');
    expect(cam2.got.map((p) => p.topic)).toEqual(['devices/cam-2/result']);
    expect([...new Set(cam1.got.map((p) => p.topic))].sort()).toEqual(['devices/cam-1/result', 'devices/cam-1/rpc/x', 'devices/cam-1/stream']);
    const streamed = on(cam1, 'devices/cam-1/stream').map((p) => (JSON.parse(p.payload.toString()) as { delta: string }).delta);
    expect(streamed.join('')).toBe('sim answer to: from cam-1');
  });

  it("refuses cam-1's publish on cam-2's request topic (PUBACK 0x87): the upstream never sees it", async () => {
    const { h } = await setup();
    const cam1 = await login(h.url, 'cam-1');
    await cam1.c.subscribeAsync('devices/cam-1/result', { qos: 1 });
    const foreign = cam1.c.publishAsync('devices/cam-2/infer/normal', JSON.stringify(ask('spoof', 'spoofed by cam-1')), { qos: 1 });
    await expect(foreign).rejects.toMatchObject({ code: 135 });
    // A request of its own afterwards, answered: the bridge was listening all along.
    await cam1.c.publishAsync('devices/cam-1/infer/normal', JSON.stringify(ask('own', 'own request')), { qos: 1 });
    await waitUntil(() => on(cam1, 'devices/cam-1/result').length > 0, 5000, 10);
    expect(okOf(replyOf(on(cam1, 'devices/cam-1/result')[0])).id).toBe('own');
    expect(contents(h)).toEqual(['own request']);
  });

  it("takes cam-1's raw image on its own image topic through the recipe, and refuses it on cam-2's", async () => {
    const { h: harness } = await setup();
    const cam1 = await login(harness.url, 'cam-1');
    await cam1.c.subscribeAsync('devices/cam-1/result', { qos: 1 });
    const frame = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(64, 1), Buffer.from([0xff, 0xd9])]);
    const foreign = cam1.c.publishAsync('devices/cam-2/image/normal/none/f0', frame, { qos: 1 });
    await expect(foreign).rejects.toMatchObject({ code: 135 });
    await cam1.c.publishAsync('devices/cam-1/image/normal/none/f1', frame, { qos: 1 });
    await waitUntil(() => on(cam1, 'devices/cam-1/result').length > 0, 5000, 10);
    // No template "none" is configured: the bridge read the image and answered by name.
    expect(replyOf(on(cam1, 'devices/cam-1/result')[0])).toMatchObject({ id: 'f1', ok: false, error: { message: 'unknown template "none"' } });
  });

  it("the bridge user reads the bridge's retained status; a device does not", async () => {
    const { h, instanceId } = await setup();
    const bridgeUser = await login(h.url, 'bridge');
    const cam1 = await login(h.url, 'cam-1');
    await cam1.c.subscribeAsync(['bridge/#', 'devices/cam-1/result'], { qos: 1 });
    await bridgeUser.c.subscribeAsync(topics.status(instanceId), { qos: 1 });
    await waitUntil(() => on(bridgeUser, topics.status(instanceId)).length > 0, 5000, 10);
    const status = on(bridgeUser, topics.status(instanceId))[0];
    expect(status?.retain).toBe(true);
    expect(StatusSchema.parse(JSON.parse(status?.payload.toString() ?? 'null'))).toMatchObject({ state: 'online', instance: instanceId });
    // A request answered after the subscription: cam-1 would have had the retained status by then.
    await cam1.c.publishAsync('devices/cam-1/infer/normal', JSON.stringify(ask('after', 'after status')), { qos: 1 });
    await waitUntil(() => on(cam1, 'devices/cam-1/result').length > 0, 5000, 10);
    expect(cam1.got.map((p) => p.topic)).toEqual(['devices/cam-1/result']);
  });

  it("the scada user reads cam-1's request, result, stream and the bridge's status, and may publish nothing", async () => {
    const { h, instanceId } = await setup();
    const scada = await login(h.url, 'scada');
    await scada.c.subscribeAsync(['devices/+/infer/+', 'devices/+/result', 'devices/+/stream', 'bridge/#'], { qos: 1 });
    await waitUntil(() => on(scada, topics.status(instanceId)).length > 0, 5000, 10);
    const cam1 = await login(h.url, 'cam-1');
    await cam1.c.subscribeAsync('devices/cam-1/result', { qos: 1 });
    await cam1.c.publishAsync('devices/cam-1/infer/normal', JSON.stringify(ask('seen', 'seen by scada', { stream: true })), { qos: 1 });
    await waitUntil(() => on(scada, 'devices/cam-1/result').length > 0, 5000, 10);
    expect(JSON.parse(on(scada, 'devices/cam-1/infer/normal')[0]?.payload.toString() ?? 'null')).toMatchObject({ id: 'seen' });
    expect(okOf(replyOf(on(scada, 'devices/cam-1/result')[0])).content).toBe('sim answer to: seen by scada');
    expect(on(scada, 'devices/cam-1/stream').length).toBeGreaterThan(0);
    // Writing nothing: neither a request in a device's name nor a status of its own.
    await expect(scada.c.publishAsync('devices/cam-1/infer/normal', JSON.stringify(ask('forged', 'forged by scada')), { qos: 1 })).rejects.toMatchObject({
      code: 135,
    });
    await expect(scada.c.publishAsync(topics.status('forged'), 'x', { qos: 1 })).rejects.toMatchObject({ code: 135 });
    expect(contents(h)).toEqual(['seen by scada']);
  });

  it('a bridge with wrong credentials does not start: the error names BROKER_URL', async () => {
    const { h } = await setup();
    const config = loadConfig({
      MQTT_PORT: '0',
      HTTP_PORT: '0',
      LOG_LEVEL: 'silent',
      BROKER_URL: h.url,
      BROKER_USERNAME: 'bridge',
      BROKER_PASSWORD: 'not-the-password',
      INSTANCE_ID: `acl-wrong-${randomBytes(3).toString('hex')}`,
    });
    const started = startBridge({ ...config, upstreamUrl: h.upstream.url }, createLogger('silent'));
    const error = await started.then(
      async (bridge) => {
        await bridge.shutdown();
        return undefined;
      },
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/BROKER_URL/);
    expect((error as Error).message).toContain(h.url.replace(/\/?$/, ''));
    expect((error as Error).message).not.toContain('not-the-password');
    // Nothing of it reached the broker's devices or the upstream.
    expect(h.upstream.requests).toEqual([]);
  });
});
