// Brokers that act as one: Aedes with mqemitter-redis and aedes-persistence-redis on the
// shared Redis, real MQTT over TCP. Each test uses its own deployment prefix.
import { randomBytes } from 'node:crypto';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import type createPersistence from 'aedes-persistence-redis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../bridge/logger.js';
import { startBroker, type Broker, type BrokerConfig } from '../../broker/broker.js';
import { createClusterPlugins, type ClusterPlugins, type OpenRedis } from '../../broker/cluster.js';
import { loadConfig } from '../../bridge/config/config.js';
import { newRedis } from '../../bridge/config/redis-endpoint.js';
import { connectRedis, deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';
import { sessionReady } from '../helpers/broker-ready.js';
import { readUntil } from '../helpers/wait.js';
import { startPrivateRedis, type PrivateRedis } from '../../bench/redis-server.js';

const logger = createLogger('silent');
const redis = connectRedis();
// The schema's defaults for every limit, as the bridge passes them.
const config: BrokerConfig = {
  ...loadConfig({}),
  mqttHost: '127.0.0.1',
  mqttPort: 0,
  allowAnonymous: true,
  maxConnections: 100,
  connectTimeoutMs: 10_000,
  keepaliveLimitS: 600,
  drainTimeoutMs: 2000,
  maxInflightQos2: 100,
};

interface Node {
  broker: Broker;
  plugins: ClusterPlugins;
  url: string;
}
interface Received {
  topic: string;
  payload: string;
}
interface TestClient {
  client: MqttClient;
  received: Received[];
  sessionPresent: boolean;
  /** Resolves once a message with this payload has arrived. */
  waitFor(payload: string, timeoutMs?: number): Promise<void>;
}

const nodes: Node[] = [];
const clients: MqttClient[] = [];
const prefixes: string[] = [];
const privateRedis: PrivateRedis[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.endAsync(true).catch(() => undefined)));
  await Promise.all(nodes.splice(0).map((n) => n.broker.close()));
  await Promise.all(privateRedis.splice(0).map((r) => r.stop()));
  for (const prefix of prefixes.splice(0)) await deletePrefix(redis, prefix);
});
afterAll(() => redis.disconnect());

function newPrefix(): string {
  const prefix = uniquePrefix('cluster');
  prefixes.push(prefix);
  return prefix;
}

/** Connections to the Redis at `url`, as the bridge opens them. */
const openAt =
  (url: string): OpenRedis =>
  (Redis, options) =>
    newRedis(Redis, { url }, options);

const deviceId = (): string => `cam-${randomBytes(4).toString('hex')}`;
const resultTopic = (id: string): string => `devices/${id}/result`;

async function startNode(prefix: string, redisUrl = REDIS_URL): Promise<Node> {
  const plugins = await createClusterPlugins(openAt(redisUrl), prefix, logger);
  const broker = await startBroker(config, async () => {}, logger, plugins);
  const node = { broker, plugins, url: `mqtt://127.0.0.1:${broker.mqttPort}` };
  nodes.push(node);
  return node;
}

async function stopNode(node: Node): Promise<void> {
  nodes.splice(nodes.indexOf(node), 1);
  await node.broker.close();
}

/** Connects with the message listener in place before CONNACK, so queued messages are not missed. */
async function connect(node: Node, clientId: string, options: IClientOptions = {}): Promise<TestClient> {
  const client = mqtt.connect(node.url, { clientId, reconnectPeriod: 0, ...options });
  clients.push(client);
  const received: Received[] = [];
  const waiters = new Set<() => void>();
  client.on('message', (topic, payload) => {
    received.push({ topic, payload: payload.toString() });
    for (const wake of waiters) wake();
  });
  const connack = await new Promise<{ sessionPresent: boolean }>((resolve, reject) => {
    client.once('connect', resolve);
    client.once('error', reject);
  });
  return {
    client,
    received,
    sessionPresent: connack.sessionPresent,
    waitFor(payload, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (!received.some((m) => m.payload === payload)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${clientId}: no message ${payload} after ${timeoutMs} ms; got ${JSON.stringify(received)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

async function subscribe(c: TestClient, topic: string): Promise<void> {
  const granted = await c.client.subscribeAsync(topic, { qos: 1 });
  expect(granted.map((g) => g.qos)).toEqual([1]);
}

const publish = (node: Node, topic: string, payload: string, retain = false): Promise<void> =>
  node.broker.publish(topic, Buffer.from(payload), { qos: 1, retain });

/** Waits until a node has learned (over Redis) of a persistent subscription made on another. */
async function knowsSubscription(node: Node, topic: string, clientId: string): Promise<void> {
  const persistence = node.plugins.persistence as createPersistence.RedisPersistence;
  const knows = (subs: { clientId: string }[]): boolean => subs.some((s) => s.clientId === clientId);
  if (knows(await readUntil(() => persistence.subscriptionsByTopic(topic), knows, 2000))) return;
  throw new Error(`subscription of ${clientId} to ${topic} never reached the node`);
}

/** Redis connections named after this deployment (createClusterPlugins names each one). */
async function connectionsOf(prefix: string): Promise<number> {
  const list = (await redis.call('CLIENT', 'LIST')) as string;
  return list.split('\n').filter((line) => line.includes(` name=${prefix}:`)).length;
}

/** The messages queued in a persistent session, not yet acknowledged (aedes-persistence-redis' list). */
const outgoingOf = (prefix: string, clientId: string): Promise<number> => redis.llen(`{${prefix}}:aedes:outgoing:${clientId}`);

describe('brokers on one Redis act as one', () => {
  it('delivers a reply published on one instance to a device connected to another', async () => {
    const prefix = newPrefix();
    const [one, two] = [await startNode(prefix), await startNode(prefix)];
    const id = deviceId();
    const device = await connect(one, `${id}.sub`);
    await subscribe(device, resultTopic(id));

    await publish(two, resultTopic(id), 'from-two');
    await device.waitFor('from-two');
    await publish(one, resultTopic(id), 'from-one');
    await device.waitFor('from-one');
    expect(device.received).toEqual([
      { topic: resultTopic(id), payload: 'from-two' },
      { topic: resultTopic(id), payload: 'from-one' },
    ]);
  });

  it('delivers to a device on the publishing instance at once and once, without waiting for Redis pub/sub', async () => {
    // A private Redis, because CLIENT PAUSE holds every client of the server.
    const server = await startPrivateRedis();
    privateRedis.push(server);
    const prefix = newPrefix();
    const [one, two] = [await startNode(prefix, server.url), await startNode(prefix, server.url)];
    const id = deviceId();
    const here = await connect(one, `${id}.here`);
    const there = await connect(two, `${id}.there`);
    await subscribe(here, resultTopic(id));
    await subscribe(there, resultTopic(id));

    const admin = connectRedis(server.url);
    try {
      // Holds every PUBLISH (a write command for CLIENT PAUSE) for 1.5 s.
      await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
      const published = one.broker.publish(resultTopic(id), Buffer.from('held'), { qos: 0, retain: false });
      await here.waitFor('held', 1000);
      expect(there.received).toEqual([]); // it really was held: the other instance only gets it through Redis

      await there.waitFor('held', 5000);
      await published;
      // A barrier: published on the other instance after `held` reached Redis, it comes to this
      // instance over Redis after the copy of `held` that came back, so that copy has been and gone.
      await publish(two, resultTopic(id), 'after');
      await Promise.all([here.waitFor('after'), there.waitFor('after')]);
      const both = [
        { topic: resultTopic(id), payload: 'held' },
        { topic: resultTopic(id), payload: 'after' },
      ];
      expect(here.received).toEqual(both);
      expect(there.received).toEqual(both);
    } finally {
      admin.disconnect();
    }
  });

  it('forwards an MQTT 5 publish sent through a topic alias to a v5 subscriber on another instance', async () => {
    const prefix = newPrefix();
    const [one, two] = [await startNode(prefix), await startNode(prefix)];
    const id = deviceId();
    const watcher = await connect(two, `${id}.sub`, { protocolVersion: 5 });
    await subscribe(watcher, `devices/${id}/#`);
    const sender = await connect(one, `${id}.pub`, { protocolVersion: 5 });
    const topic = `devices/${id}/infer/normal`;
    await sender.client.publishAsync(topic, 'first', { qos: 1, properties: { topicAlias: 1 } });
    await sender.client.publishAsync('', 'by-alias', { qos: 1, properties: { topicAlias: 1 } });
    await watcher.waitFor('by-alias');
    expect(watcher.received).toEqual([
      { topic, payload: 'first' },
      { topic, payload: 'by-alias' },
    ]);
    expect(watcher.client.connected).toBe(true);
  });

  it('gives a retained status published on one instance to a subscriber on another', async () => {
    const prefix = newPrefix();
    const one = await startNode(prefix);
    await publish(one, 'bridge/bridge-1/status', '{"state":"online"}', true);
    const two = await startNode(prefix);
    const device = await connect(two, deviceId());
    await subscribe(device, 'bridge/+/status');
    await device.waitFor('{"state":"online"}');
    // Published before this subscriber existed, on the other instance: only a retained message arrives.
    expect(device.received).toEqual([{ topic: 'bridge/bridge-1/status', payload: '{"state":"online"}' }]);
  });

  it('keeps a persistent session across instances and a restart: QoS 1 replies sent while away arrive', async () => {
    const prefix = newPrefix();
    const [one, two] = [await startNode(prefix), await startNode(prefix)];
    const id = deviceId();
    const first = await connect(one, id, { clean: false });
    expect(first.sessionPresent).toBe(false);
    await subscribe(first, resultTopic(id));
    await knowsSubscription(two, resultTopic(id), id);
    await first.client.endAsync();

    // The device is away and its instance is down; another instance publishes the reply.
    await stopNode(one);
    await publish(two, resultTopic(id), 'while-away');

    const restarted = await startNode(prefix);
    const back = await connect(restarted, id, { clean: false });
    expect(back.sessionPresent).toBe(true);
    await back.waitFor('while-away'); // delivered without subscribing again
    expect(back.received).toEqual([{ topic: resultTopic(id), payload: 'while-away' }]);
  });

  it('a single instance restarted on the same Redis delivers what was queued before the restart', async () => {
    const prefix = newPrefix();
    const one = await startNode(prefix);
    const id = deviceId();
    const first = await connect(one, id, { clean: false });
    await subscribe(first, resultTopic(id));
    await first.client.endAsync();
    await publish(one, resultTopic(id), 'before-restart');
    await stopNode(one);

    const restarted = await startNode(prefix);
    const back = await connect(restarted, id, { clean: false });
    expect(back.sessionPresent).toBe(true);
    await back.waitFor('before-restart');
    // Acknowledged (the session's queue empties with the PUBACK), so not delivered again on the next reconnect.
    const queued = (): Promise<number> => outgoingOf(prefix, id);
    await readUntil(queued, (n) => n === 0);
    await back.client.endAsync();
    const connected = sessionReady(restarted.broker.aedes, id);
    const again = await connect(restarted, id, { clean: false });
    await connected; // what the session still held is written by now
    // A barrier: anything redelivered arrives before this.
    await publish(restarted, resultTopic(id), 'after');
    await again.waitFor('after');
    expect(again.received).toEqual([{ topic: resultTopic(id), payload: 'after' }]);
  });

  it('keeps two deployments with different prefixes apart: messages and sessions', async () => {
    const [x, y] = [newPrefix(), newPrefix()];
    const xNode = await startNode(x);
    const yNode = await startNode(y);
    const id = deviceId();

    // Live messages: y's publish goes out first; were it to leak, it would arrive before x's, sent
    // by another x instance so that it too comes to xNode over Redis.
    const xPeer = await startNode(x);
    const live = await connect(xNode, `${id}.live`);
    await subscribe(live, resultTopic(id));
    await publish(yNode, resultTopic(id), 'from-y');
    await publish(xPeer, resultTopic(id), 'from-x');
    await live.waitFor('from-x');
    expect(live.received.map((m) => m.payload)).toEqual(['from-x']);
    await live.client.endAsync();

    // Sessions: a persistent session in x is unknown to y, even to a y instance started after it.
    const device = await connect(xNode, id, { clean: false });
    await subscribe(device, resultTopic(id));
    await device.client.endAsync();
    const yLater = await startNode(y);
    await publish(yLater, resultTopic(id), 'queued-in-y');
    await publish(xNode, resultTopic(id), 'queued-in-x');
    const connected = sessionReady(xNode.broker.aedes, id);
    const back = await connect(xNode, id, { clean: false });
    await connected; // all the session held is written by now
    // A barrier, over Redis as a leak from y would come: anything queued or leaked arrives before it.
    await publish(xPeer, resultTopic(id), 'barrier');
    await back.waitFor('barrier');
    expect(back.received.map((m) => m.payload)).toEqual(['queued-in-x', 'barrier']);

    // Every key the persistence wrote is under x's hash tag; none under the library's bare names.
    const xKeys = await redis.keys(`{${x}}:*`);
    expect(xKeys).toContain(`{${x}}:aedes:client:${id}`);
    expect(xKeys.every((k) => k.startsWith(`{${x}}:aedes:`))).toBe(true);
    expect(await redis.exists(`client:${id}`, `outgoing:${id}`)).toBe(0);
  });

  it('closes its Redis connections when the broker closes', async () => {
    const prefix = newPrefix();
    const node = await startNode(prefix);
    expect(await connectionsOf(prefix)).toBe(3); // emitter pub + sub, persistence
    await stopNode(node);
    const open = (): Promise<number> => connectionsOf(prefix);
    expect(await readUntil(open, (n) => n === 0, 1000)).toBe(0);
  });

  it('refuses a prefix that would be a Redis glob or an MQTT wildcard', async () => {
    for (const bad of ['a*', 'a/b', 'a+', '{a}', '']) {
      await expect(createClusterPlugins(openAt(REDIS_URL), bad, logger)).rejects.toThrow(/Redis prefix/);
    }
    await expect(createClusterPlugins(openAt('http://127.0.0.1:6379'), 'p', logger)).rejects.toThrow(/REDIS_URL/);
  });
});
