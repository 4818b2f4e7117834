// Mosquitto 2.0 facts the bridge's external-broker mode is built on: a shared subscription
// hands each message to one member, and the ACL must allow the real topic, not the $share filter.
import { afterEach, describe, expect, it } from 'vitest';
import type { MqttClient } from 'mqtt';
import { broker, client, closeAll, echo, sessionClient, uid, waitUntil } from '../helpers/mosquitto-clients.js';

afterEach(closeAll);

describe('a. shared subscription', () => {
  it('gives each of 200 QoS 1 messages to exactly one of two members, and both get some', async () => {
    const b = await broker();
    const group = uid();
    const got = [new Map<string, number>(), new Map<string, number>()];
    const members: MqttClient[] = [];
    for (const seen of got) {
      const c = await client(b.url);
      c.on('message', (topic, payload) => {
        if (topic.startsWith('devices/')) seen.set(payload.toString(), (seen.get(payload.toString()) ?? 0) + 1);
      });
      await c.subscribeAsync(`$share/${group}/devices/+/infer/+`, { qos: 1 });
      members.push(c);
    }
    const pub = await client(b.url);
    await Promise.all(Array.from({ length: 200 }, (_, n) => pub.publishAsync(`devices/d${n}/infer/normal`, `m${n}`, { qos: 1 })));
    const [a, c] = got as [Map<string, number>, Map<string, number>];
    await waitUntil(() => a.size + c.size === 200, '200 deliveries');
    // A barrier on each member: a second copy of any message would come before its own echo.
    for (const member of members) expect(await echo(member, 'barrier')).toBe('barrier');
    for (let n = 0; n < 200; n += 1) expect((a.get(`m${n}`) ?? 0) + (c.get(`m${n}`) ?? 0)).toBe(1);
    expect(a.size).toBeGreaterThan(0);
    expect(c.size).toBeGreaterThan(0);
  });
});

const BRIDGE_ACL = [
  '# devices (username = device id): publish own requests, read own results and MQTT 5 response topics',
  'pattern write devices/%u/infer/+',
  'pattern read devices/%u/result',
  'pattern read devices/%u/stream',
  'pattern read devices/%u/rpc/#',
  'user bridge',
  '# $share/edge-ai-bridge/devices/+/infer/+ is checked per message against its real topic',
  'topic read devices/+/infer/+',
  'topic write devices/+/result',
  'topic write devices/+/stream',
  'topic write devices/+/rpc/#',
  'topic readwrite bridge/#',
];
const USERS = { 'cam-1': 'p1', 'cam-2': 'p2', bridge: 'pb' };

// The device ACL itself is tested end to end with the bridge in test/e2e/external-acl.test.ts.
describe('d. device ACLs', () => {
  it('a "topic read $share/..." line alone lets the bridge subscribe but delivers nothing', async () => {
    const acl = BRIDGE_ACL.filter((l) => l !== 'topic read devices/+/infer/+').concat('topic read $share/edge-ai-bridge/devices/+/infer/+');
    const b = await broker({ users: USERS, acl });
    const bridge = await sessionClient(b.url, `bridge-${uid()}`, () => 0, { username: 'bridge', password: 'pb' });
    expect((await bridge.c.subscribeAsync('$share/edge-ai-bridge/devices/+/infer/+', { qos: 1 })).map((g) => g.qos)).toEqual([1]);
    const cam = await client(b.url, { username: 'cam-1', password: 'p1' });
    await cam.publishAsync('devices/cam-1/infer/normal', 'own', { qos: 1 });
    // A barrier: a message of the bridge's own (its ACL allows bridge/#), after 'own' would have come.
    expect(await echo(bridge.c, 'barrier', 'bridge')).toBe('barrier');
    expect(bridge.received.map((r) => r.payload)).toEqual(['barrier']);
  });
});
