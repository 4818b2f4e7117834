// Replies leave here: one QoS 1 publish on the device's own result topic.
import { topics, type Reply } from './contract.js';

/** How the bridge publishes into the broker; the in-process Aedes in production. */
export type Publish = (topic: string, payload: Buffer, options: { qos: 0 | 1; retain: boolean }) => Promise<void>;

export class Results {
  constructor(private readonly publish: Publish) {}

  send(deviceId: string, reply: Reply): Promise<void> {
    return this.publish(topics.result(deviceId), Buffer.from(JSON.stringify(reply)), { qos: 1, retain: false });
  }
}
