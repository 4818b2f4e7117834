// The plant's namespace on the plant's broker with the ACL lines of docs/plant-broker.md: the
// bridge's account writes the UNS root, the SCADA account reads it, a device can do neither
// (its forged tag never reaches SCADA). What SCADA receives also goes through scada-sim's
// checker: no invalid or non-retained tag.
import { writeFileSync } from 'node:fs';
import mqtt, { type IPublishPacket, type MqttClient } from 'mqtt';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { UnsPayloadSchema, type Reply } from '../../contract/index.js';
import { SessionChecker } from '../../scada-sim/check.js';
import { okOf, startHarness, type Harness } from '../helpers/harness.js';
import { PLANT_ACL } from '../helpers/mosquitto.js';
import { tempDir } from '../helpers/security.js';
import { eventually } from '../helpers/wait.js';

const ROOT = 'acme/plant-1';
const TOPIC = `${ROOT}/stamping/line-3/press-1/ai/inspect`;
// As the doc says: the read line in the `user scada` block, the write line in `user bridge` (the last).
const ACL = [...PLANT_ACL.flatMap((line) => (line === 'user scada' ? [line, `topic read ${ROOT}/#`] : [line])), `topic write ${ROOT}/#`];
const USERS = { 'press-1': 'pw-press-1', bridge: 'pw-bridge', scada: 'pw-scada' };
const ANSWER = { reject: true, burr_mm: 0.31 };

const dir = tempDir('eab-uns-acl-');
afterAll(() => dir.remove());

const clients: MqttClient[] = [];
let h: Harness | undefined;
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.endAsync(true)));
  await h?.close();
  h = undefined;
});

/**
 * A login; its messages under the root also go through a checker. SCADA logs in with MQTT 5
 * (subscribing with `rap` keeps the retain flag of a live tag), a device with MQTT 3.1.1.
 */
async function login(username: keyof typeof USERS, clientId: string): Promise<{ c: MqttClient; got: IPublishPacket[]; checker: SessionChecker }> {
  const c = await mqtt.connectAsync(h?.url ?? '', {
    clientId,
    username,
    password: USERS[username],
    reconnectPeriod: 0,
    protocolVersion: username === 'scada' ? 5 : 4,
  });
  clients.push(c);
  const got: IPublishPacket[] = [];
  const checker = new SessionChecker({ unsRoot: ROOT });
  c.on('message', (topic, payload, packet) => {
    checker.feed(topic, payload, packet.retain);
    got.push(packet);
  });
  return { c, got, checker };
}

describe('UNS on the plant broker with the documented ACL', () => {
  it('lets the bridge write the root and SCADA read it; a device can neither forge nor read a tag', async () => {
    const config = `${dir.path}/config.json`;
    const output = { type: 'object', properties: { reject: { type: 'boolean' }, burr_mm: { type: 'number' } }, required: ['reject', 'burr_mm'] };
    writeFileSync(
      config,
      JSON.stringify({
        templates: { inspect: { messages: [{ role: 'user', content: 'Part {{part}}?' }], output } },
        uns: { root: ROOT, devices: { 'press-*': 'stamping/line-3' } },
      }),
    );
    h = await startHarness({ CONFIG_FILE: config, BROKER_USERNAME: 'bridge', BROKER_PASSWORD: USERS.bridge, MAX_ATTEMPTS: '1' }, {}, undefined, {
      mode: 'external',
      mosquitto: { users: USERS, acl: ACL, verbose: true }, // verbose: it logs the publishes it denies
    });
    const press = await login('press-1', 'press-1');
    await press.c.subscribeAsync(['devices/press-1/result', `${ROOT}/#`], { qos: 1 });
    h.upstream.script({
      status: 200,
      body: {
        id: 'chatcmpl-uns',
        object: 'chat.completion',
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify(ANSWER) }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 },
      },
    });
    await press.c.publishAsync('devices/press-1/infer/normal', JSON.stringify({ id: 'r-1', template: 'inspect', vars: { part: 'A7' } }), { qos: 1 });
    await eventually('the reply', () => press.got.some((p) => p.topic === 'devices/press-1/result'));
    const reply = JSON.parse(String(press.got.find((p) => p.topic === 'devices/press-1/result')?.payload)) as Reply;
    expect(okOf(reply).data).toEqual(ANSWER);

    const scada = await login('scada', 'scada-1');
    await scada.c.subscribeAsync(`${ROOT}/#`, { qos: 1, rap: true });
    await eventually('the retained tag', () => scada.got.length === 1);
    expect(scada.got[0]?.topic).toBe(TOPIC);
    expect(scada.got[0]?.retain).toBe(true);
    expect(UnsPayloadSchema.parse(JSON.parse(String(scada.got[0]?.payload)))).toMatchObject({ data: ANSWER, quality: 'good', requestId: 'r-1' });

    // Mosquitto drops a publish the ACL refuses (acknowledged, not delivered, not retained).
    await press.c.publishAsync(TOPIC, JSON.stringify({ data: { reject: false }, quality: 'good', timestamp: 1, requestId: 'forged' }), {
      qos: 1,
      retain: true,
    });
    await eventually('the denial', () => h?.mosquitto?.logs().includes(`Denied PUBLISH from press-1 (d0, q1, r1, m`) === true);
    expect(scada.got).toHaveLength(1);
    expect(press.got.filter((p) => p.topic.startsWith(`${ROOT}/`))).toEqual([]);
    const late = await login('scada', 'scada-2');
    await late.c.subscribeAsync(`${ROOT}/#`, { qos: 1, rap: true });
    await eventually('the retained tag', () => late.got.length === 1);
    expect((JSON.parse(String(late.got[0]?.payload)) as { requestId: string }).requestId).toBe('r-1');
    expect([...scada.checker.violations, ...late.checker.violations]).toEqual([]);
    expect(late.checker.table().map((t) => [t.source, t.metric, t.value, t.quality])).toEqual([
      [TOPIC, 'burr_mm', ANSWER.burr_mm, 'good'],
      [TOPIC, 'reject', ANSWER.reject, 'good'],
    ]);
  });
});
