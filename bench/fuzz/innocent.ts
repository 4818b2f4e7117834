// The innocent device: a registered device sending one ordinary request a second (normal
// priority, QoS 1) and timing each reply. Its experience is what the oracles judge.
import mqtt, { type MqttClient } from 'mqtt';
import { INNOCENT_ID, INNOCENT_PASSWORD } from './scene.js';

/** `warmup`: the first seconds, connections and caches still cold; not part of any latency figure. */
export type Phase = 'warmup' | 'baseline' | 'attack' | 'drain';

export interface InnocentRequest {
  id: string;
  phase: Phase;
  sentAt: number;
  /** Reply latency in ms; unset while unanswered. */
  latencyMs?: number;
  /** `ok`, or the error reply's code. */
  outcome?: string;
}

export class Innocent {
  readonly requests = new Map<string, InnocentRequest>();
  phase: Phase = 'warmup';
  /** Replies on its result topic to requests it never sent (another client publishing as it). */
  foreignReplies = 0;
  /** A second reply to one of its requests: allowed (at least once), counted. */
  repeatedReplies = 0;
  private timer: NodeJS.Timeout | undefined;
  private n = 0;

  private constructor(private readonly client: MqttClient) {
    client.on('message', (_topic, payload) => this.onReply(payload));
  }

  static async connect(port: number): Promise<Innocent> {
    const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, {
      clientId: INNOCENT_ID,
      username: INNOCENT_ID,
      password: INNOCENT_PASSWORD,
      protocolVersion: 5,
      reconnectPeriod: 500,
      connectTimeout: 5000,
    });
    client.on('error', () => undefined);
    await new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    });
    // Subscribed again on every reconnect (a clean session forgets it).
    client.on('connect', () => void client.subscribeAsync(`devices/${INNOCENT_ID}/result`, { qos: 1 }).catch(() => undefined));
    await client.subscribeAsync(`devices/${INNOCENT_ID}/result`, { qos: 1 });
    return new Innocent(client);
  }

  start(everyMs = 1000): void {
    this.timer = setInterval(() => this.send(), everyMs);
  }

  /** Stops sending; answers still count until close(). */
  stopSending(): void {
    clearInterval(this.timer);
  }

  unanswered(): number {
    return [...this.requests.values()].filter((r) => r.outcome === undefined).length;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.client.endAsync(true).catch(() => undefined);
  }

  private send(): void {
    const id = `inn-${(this.n += 1)}`;
    this.requests.set(id, { id, phase: this.phase, sentAt: Date.now() });
    const body = JSON.stringify({ id, messages: [{ role: 'user', content: `Is part ${id} within tolerance?` }], max_tokens: 16 });
    this.client.publish(`devices/${INNOCENT_ID}/infer/normal`, body, { qos: 1 }, () => undefined);
  }

  private onReply(payload: Buffer): void {
    let reply: { id?: unknown; ok?: unknown; error?: { code?: unknown } };
    try {
      reply = JSON.parse(payload.toString()) as typeof reply;
    } catch {
      this.foreignReplies += 1;
      return;
    }
    const request = typeof reply.id === 'string' ? this.requests.get(reply.id) : undefined;
    if (request === undefined) {
      this.foreignReplies += 1;
      return;
    }
    if (request.outcome !== undefined) {
      this.repeatedReplies += 1;
      return;
    }
    request.latencyMs = Date.now() - request.sentAt;
    request.outcome = reply.ok === true ? 'ok' : String(reply.error?.code ?? 'error');
  }
}
