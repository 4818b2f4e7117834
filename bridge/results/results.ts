// Replies leave here: one QoS 1 publish on the device's own result topic and, when the
// request named an MQTT 5 Response Topic, one more there with its Correlation Data. A CBOR
// request's reply is CBOR on both, with that Content Type.
import { encodeCbor } from '../../contract/cbor.js';
import { CONTENT_TYPE_CBOR, CONTENT_TYPE_JSON, topics, type Publish, type PublishProperties, type Reply, type ReplyRoute } from '../../contract/index.js';
import type { Logger } from '../logger.js';
import type { AnswerSink } from '../scada/answers.js';
import { StreamPublisher, type StreamSettings } from './stream.js';

/** Who gets a reply: a queued job, or a request refused before it became one. */
export interface ReplyTarget {
  deviceId: string;
  route?: ReplyRoute | undefined;
  /** The request's deadline: the reply on the response topic expires with it. */
  deadlineMs?: number | undefined;
  /** The template a template request named: its replies also go to the SCADA outputs. */
  template?: string | undefined;
}

export interface ReplyObserver {
  reply(reply: Reply, deviceId: string): void;
}

/** STREAM_FLUSH_MS, STREAM_FLUSH_BYTES and STREAM_QOS defaults. */
export const DEFAULT_STREAM_SETTINGS: StreamSettings = { flushMs: 100, flushBytes: 512, qos: 0 };

export class Results {
  constructor(
    private readonly publish: Publish,
    /** Sees every reply on its way out (metrics): the one place all of them pass. */
    private readonly observer?: ReplyObserver,
    private readonly clock: () => number = Date.now,
    private readonly streamSettings: StreamSettings = DEFAULT_STREAM_SETTINGS,
    /** The SCADA outputs, when UNS or Sparkplug is on. */
    private readonly answers?: AnswerSink,
  ) {}

  /** Where a `"stream": true` request's text goes as it is written (devices/{id}/stream). */
  openStream(deviceId: string, requestId: string, log: Logger): StreamPublisher {
    return new StreamPublisher(this.publish, deviceId, requestId, this.streamSettings, log, this.clock);
  }

  async send(target: ReplyTarget, reply: Reply): Promise<void> {
    this.observer?.reply(reply, target.deviceId);
    if (this.answers !== undefined && target.template !== undefined) {
      this.answers.answered({ deviceId: target.deviceId, template: target.template, reply, atMs: this.clock() });
    }
    const { route } = target;
    const cbor = route?.format === 'cbor';
    const outgoing = forDevice(reply);
    const payload = cbor ? encodeCbor(outgoing) : Buffer.from(JSON.stringify(outgoing));
    if (!route) {
      await this.publish(topics.result(target.deviceId), payload, { qos: 1, retain: false });
      return;
    }
    const userProperties = route.userProperties;
    const onResult = cbor ? { contentType: CONTENT_TYPE_CBOR, userProperties } : userProperties && { userProperties };
    const sent = [this.publish(topics.result(target.deviceId), payload, { qos: 1, retain: false, properties: onResult })];
    if (route.responseTopic !== undefined) {
      const properties: PublishProperties = { contentType: cbor ? CONTENT_TYPE_CBOR : CONTENT_TYPE_JSON, userProperties };
      if (route.correlationData !== undefined) properties.correlationData = Buffer.from(route.correlationData, 'base64');
      if (target.deadlineMs !== undefined) properties.messageExpiryInterval = secondsLeft(target.deadlineMs, this.clock());
      sent.push(this.publish(route.responseTopic, payload, { qos: 1, retain: false, properties }));
    }
    await Promise.all(sent);
  }
}

/**
 * The reply as the device gets it: an `invalid_output`'s `raw` (up to 4 KiB of the model's text)
 * stays with the stored reply and the dead letter, for the operator; a constrained device's
 * buffer need not hold it.
 */
function forDevice(reply: Reply): Reply {
  if (reply.ok || reply.error.raw === undefined) return reply;
  const { raw: _raw, ...error } = reply.error;
  return { ...reply, error };
}

/** The time left before a deadline, in whole seconds; at least 1, so a late reply still reaches a connected subscriber. */
function secondsLeft(deadlineMs: number, now: number): number {
  return Math.max(1, Math.ceil((deadlineMs - now) / 1000));
}
