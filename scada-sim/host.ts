// The MQTT side of scada-sim: a Sparkplug 3.0 host application. It subscribes first, then
// declares itself online on its retained STATE topic (so Edge Nodes that wait for their
// primary host birth after it is listening), feeds every message to the checker, and asks a
// node for a rebirth when the checker reports a gap.
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import sparkplug from 'sparkplug-payload';
import { REBIRTH_METRIC, SPARKPLUG_NAMESPACE, sparkplugStateTopic, sparkplugTopic } from '../contract/scada.js';
import { SessionChecker, type Violation } from './check.js';

export interface HostOptions {
  url: string;
  username?: string;
  password?: string;
  hostId: string;
  /** Only this Sparkplug group; every group when unset. */
  group?: string;
  unsRoot?: string;
  connectTimeoutMs?: number;
  onEvent?: (event: HostEvent) => void;
}

export type HostEvent =
  | { kind: 'message'; topic: string; retained: boolean; bytes: number }
  | { kind: 'violation'; violation: Violation }
  | { kind: 'rebirth'; group: string; node: string }
  | { kind: 'state'; online: boolean };

export interface Host {
  checker: SessionChecker;
  stateTopic: string;
  /** Rebirth requests sent, in order: `group/node`. */
  rebirths: string[];
  close(): Promise<void>;
}

const codec = sparkplug.get(SPARKPLUG_NAMESPACE);

/** The STATE payload: the Will's timestamp must equal the online message's (Sparkplug 3.0). */
const statePayload = (online: boolean, timestamp: number): string => JSON.stringify({ online, timestamp });

function rebirthPayload(): Buffer {
  if (codec === null) throw new Error('sparkplug-payload has no spBv1.0 codec');
  const timestamp = Date.now();
  return Buffer.from(codec.encodePayload({ timestamp, metrics: [{ name: REBIRTH_METRIC, type: 'Boolean', value: true, timestamp }] }));
}

function connect(opts: HostOptions, stateTopic: string, timestamp: number): Promise<MqttClient> {
  const options: IClientOptions = {
    protocolVersion: 5,
    clientId: `${opts.hostId}-${process.pid}-${Math.random().toString(16).slice(2, 8)}`,
    clean: true,
    reconnectPeriod: 1000,
    connectTimeout: opts.connectTimeoutMs ?? 10_000,
    will: { topic: stateTopic, payload: Buffer.from(statePayload(false, timestamp)), qos: 1, retain: true },
    ...(opts.username === undefined ? {} : { username: opts.username }),
    ...(opts.password === undefined ? {} : { password: opts.password }),
  };
  const client = mqtt.connect(opts.url, options);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`no connection to ${opts.url} within ${options.connectTimeout} ms`)), options.connectTimeout);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      client.end(true);
      reject(err);
    };
    client.once('connect', () => {
      clearTimeout(timer);
      client.off('error', fail);
      resolve(client);
    });
    client.once('error', fail);
  });
}

/** Subscriptions, then STATE online; run again on every reconnection (clean sessions). */
async function announce(client: MqttClient, opts: HostOptions, stateTopic: string, timestamp: number): Promise<void> {
  const sparkplugFilter = opts.group === undefined ? `${SPARKPLUG_NAMESPACE}/#` : `${SPARKPLUG_NAMESPACE}/${opts.group}/#`;
  await client.subscribeAsync(stateTopic, { qos: 1 });
  // No local: our own NCMDs are not news. Retain As Published: a UNS message must say whether it was retained.
  await client.subscribeAsync(sparkplugFilter, { qos: 1, nl: true });
  if (opts.unsRoot !== undefined) await client.subscribeAsync(`${opts.unsRoot}/#`, { qos: 1, rap: true });
  await client.publishAsync(stateTopic, statePayload(true, timestamp), { qos: 1, retain: true });
  opts.onEvent?.({ kind: 'state', online: true });
}

export async function startHost(opts: HostOptions): Promise<Host> {
  const stateTopic = sparkplugStateTopic(opts.hostId);
  const timestamp = Date.now();
  const checker = new SessionChecker(opts.unsRoot === undefined ? {} : { unsRoot: opts.unsRoot });
  const rebirths: string[] = [];
  const client = await connect(opts, stateTopic, timestamp);
  let closing = false;

  client.on('message', (topic, payload, packet) => {
    if (topic === stateTopic) {
      // Another session wrote us offline (our old connection's Will): say online again.
      if (!closing && !payload.toString().includes('"online":true')) client.publish(stateTopic, statePayload(true, timestamp), { qos: 1, retain: true });
      return;
    }
    opts.onEvent?.({ kind: 'message', topic, retained: packet.retain, bytes: payload.length });
    const result = checker.feed(topic, payload, packet.retain);
    for (const violation of result.violations) opts.onEvent?.({ kind: 'violation', violation });
    if (result.rebirth !== undefined && !closing) {
      const { group, node } = result.rebirth;
      client.publish(sparkplugTopic(group, 'NCMD', node), rebirthPayload(), { qos: 0 });
      rebirths.push(`${group}/${node}`);
      opts.onEvent?.({ kind: 'rebirth', group, node });
    }
  });
  client.on('connect', () => {
    void announce(client, opts, stateTopic, timestamp).catch(() => undefined);
  });
  client.on('error', () => undefined); // reconnects on its own; the CLI reports a first failure
  await announce(client, opts, stateTopic, timestamp);

  return {
    checker,
    stateTopic,
    rebirths,
    close: async () => {
      closing = true;
      // A graceful exit says offline itself, with the Will's timestamp, then disconnects.
      if (client.connected) await client.publishAsync(stateTopic, statePayload(false, timestamp), { qos: 1, retain: true }).catch(() => undefined);
      opts.onEvent?.({ kind: 'state', online: false });
      await client.endAsync();
    },
  };
}
