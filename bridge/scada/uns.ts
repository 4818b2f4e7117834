// The plant's namespace (UNS): each device's template answer, retained at QoS 1 on
// {root}/{place}/{deviceId}/ai/{template}, so a SCADA client subscribing at any time reads
// every tag's latest value at once. The broker keeps one retained message per topic: past
// SCADA_MAX_TAGS topics published by this instance, the least recently published is cleared
// (an empty retained message), so devices coming and going cannot grow it without end.
import { unsTopic, type Publish, type ScadaAnswer, type UnsPayload } from '../../contract/index.js';
import { placeOf, type UnsConfig } from '../config/uns.js';

export interface UnsOptions {
  config: UnsConfig;
  publish: Publish;
  /** Topics this instance keeps retained at most (SCADA_MAX_TAGS). */
  maxTopics: number;
}

export class UnsPublisher {
  /** Retained topics published here, least recently published first. */
  private readonly topics = new Set<string>();

  constructor(private readonly options: UnsOptions) {}

  topicOf(deviceId: string, template: string): string {
    const { root, devices } = this.options.config;
    return unsTopic(root, placeOf(devices, deviceId), deviceId, template);
  }

  /** Publishes the answer as its tag's retained state (a bad one carries the last good data it was given). */
  async publish(answer: ScadaAnswer): Promise<void> {
    const topic = this.topicOf(answer.deviceId, answer.template);
    await this.options.publish(topic, Buffer.from(JSON.stringify(payloadOf(answer))), { qos: 1, retain: true });
    this.topics.delete(topic);
    this.topics.add(topic);
    while (this.topics.size > this.options.maxTopics) {
      const oldest = this.topics.values().next().value as string;
      this.topics.delete(oldest);
      // An empty retained message clears the topic's retained one (MQTT 3.3.1.3).
      await this.options.publish(oldest, Buffer.alloc(0), { qos: 1, retain: true });
    }
  }
}

/** The UNS payload: the answer without the deviceId and template its topic already names. */
export function payloadOf(answer: ScadaAnswer): UnsPayload {
  const { quality, timestamp, requestId } = answer;
  const payload: UnsPayload = answer.data === undefined ? { quality, timestamp, requestId } : { data: answer.data, quality, timestamp, requestId };
  if (answer.model !== undefined) payload.model = answer.model;
  if (answer.latencyMs !== undefined) payload.latencyMs = answer.latencyMs;
  if (answer.error !== undefined) payload.error = answer.error;
  return payload;
}
