// What the broker carried for one device, seen by another connection of that device
// (`{deviceId}.spy`): each request publish and each reply on the result topic, with its time.
import mqtt, { type MqttClient } from 'mqtt';
import { topics } from '../../contract/index.js';

export interface Seen {
  kind: 'request' | 'reply';
  topic: string;
  /** The request's or reply's id (a raw image's id is its topic's last segment). */
  id: string | null;
  body: Record<string, unknown>;
  at: number;
}

export interface Spy {
  seen: Seen[];
  requests(id?: string): Seen[];
  replies(id?: string): Seen[];
  close(): Promise<void>;
}

export async function spyOn(url: string, deviceId: string): Promise<Spy> {
  const client: MqttClient = await mqtt.connectAsync(url, { clientId: `${deviceId}.spy`, reconnectPeriod: 500, clean: true, protocolVersion: 5 });
  const seen: Seen[] = [];
  client.on('message', (topic, payload) => {
    const kind = topic === topics.result(deviceId) ? 'reply' : 'request';
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(payload.toString()) as Record<string, unknown>;
    } catch {
      // a raw image: its id is in the topic
    }
    const id = typeof body.id === 'string' ? body.id : kind === 'request' ? (topic.split('/').pop() ?? null) : null;
    seen.push({ kind, topic, id, body, at: Date.now() });
  });
  await client.subscribeAsync([`devices/${deviceId}/infer/#`, `devices/${deviceId}/image/#`, topics.result(deviceId)], { qos: 1 });
  const of = (kind: Seen['kind'], id?: string): Seen[] => seen.filter((s) => s.kind === kind && (id === undefined || s.id === id));
  return {
    seen,
    requests: (id) => of('request', id),
    replies: (id) => of('reply', id),
    close: () => client.endAsync(),
  };
}
