// The Aedes hooks that apply the contract's topic rules to each PUBLISH and SUBSCRIBE; a
// request is admitted (onRequest) before its PUBLISH is acknowledged.
import type { AedesOptions, Client, PublishPacket, Subscription } from 'aedes';
import { parseInferTopic, requestPropertiesOf, type RequestHandler } from '../contract/index.js';
import { mayPublish, maySubscribe } from './acl.js';
import type { BrokerContext } from './context.js';
import { writeRefusal } from './puback-refusal.js';
import type { SubscriptionLimit } from './subscription-limit.js';
import { loggedTopic, topicTooLong } from './topic-length.js';

type AccessHooks = Required<Pick<AedesOptions, 'authorizePublish' | 'authorizeSubscribe'>>;
type PublishCallback = Parameters<AccessHooks['authorizePublish']>[2];
type SubscribeCallback = Parameters<AccessHooks['authorizeSubscribe']>[2];

/** `maxTopicLength`: MAX_TOPIC_LENGTH, checked before the topic rules (a refusal logs only its start). */
export function accessHooks(ctx: BrokerContext, onRequest: RequestHandler, subscriptions: SubscriptionLimit, maxTopicLength: number): AccessHooks {
  return {
    authorizePublish(client, packet, callback) {
      if (topicTooLong(packet.topic, maxTopicLength)) {
        ctx.refusals.publish += 1;
        ctx.refusalLog.refused(
          client?.id,
          'publish topic length',
          { clientId: client?.id, ...loggedTopic(packet.topic), limit: maxTopicLength },
          'publish refused: topic longer than MAX_TOPIC_LENGTH',
        );
        return callback(new Error(`topic longer than MAX_TOPIC_LENGTH (${maxTopicLength} bytes)`));
      }
      const identity = client ? ctx.identities.get(client) : undefined;
      if (!client || !identity || !mayPublish(identity, packet.topic)) {
        ctx.refusals.publish += 1;
        ctx.refusalLog.refused(
          client?.id,
          'publish acl',
          { clientId: client?.id, role: identity?.role, topic: packet.topic },
          "publish refused: outside the client's topics",
        );
        return callback(new Error('publish not authorized'));
      }
      // Aedes 2.0.0-beta.1 leaves a resolved alias as `topicAlias: undefined`, which the Redis
      // emitter turns into null: every MQTT 5 subscriber served through Redis would then fail
      // to encode the message and be disconnected.
      if (packet.properties && 'topicAlias' in packet.properties) delete packet.properties.topicAlias;
      admitRequest(ctx, onRequest, client, packet, callback);
    },

    authorizeSubscribe(client, subscription, callback) {
      if (topicTooLong(subscription.topic, maxTopicLength)) {
        ctx.refusals.subscribe += 1;
        ctx.refusalLog.refused(
          client.id,
          'subscribe topic length',
          { clientId: client.id, ...loggedTopic(subscription.topic), limit: maxTopicLength },
          'subscription refused: filter longer than MAX_TOPIC_LENGTH',
        );
        return callback(null, null); // SUBACK 128
      }
      const identity = ctx.identities.get(client);
      if (!identity || !maySubscribe(identity, subscription.topic, ctx.config.observerTopics)) {
        ctx.refusals.subscribe += 1;
        ctx.refusalLog.refused(
          client.id,
          'subscribe acl',
          { clientId: client.id, role: identity?.role, topic: subscription.topic },
          "subscription refused: outside the client's topics",
        );
        return callback(null, null); // SUBACK 128
      }
      limitSubscriptions(ctx, subscriptions, client, subscription, callback);
    },
  };
}

/** A publish on a request topic goes to onRequest; Aedes acknowledges it once this calls back. */
function admitRequest(ctx: BrokerContext, onRequest: RequestHandler, client: Client, packet: PublishPacket, callback: PublishCallback): void {
  const topic = parseInferTopic(packet.topic);
  if (!topic) return callback(null);
  // Requests are never stored as retained messages, whatever the device asked for.
  packet.retain = false;
  onRequest({ topic, payload: toBuffer(packet), properties: requestPropertiesOf(packet.properties) }).then(
    (refusal) => {
      if (refusal) writeRefusal(client, packet, refusal, ctx.quiet);
      callback(null);
    },
    (err: unknown) => {
      ctx.log.error({ err, clientId: client.id }, 'request handler failed');
      callback(null);
    },
  );
}

function limitSubscriptions(
  ctx: BrokerContext,
  subscriptions: SubscriptionLimit,
  client: Client,
  subscription: Subscription,
  callback: SubscribeCallback,
): void {
  if (subscriptions.admit(client, subscription.topic)) return callback(null, subscription);
  ctx.refusals.subscribe += 1;
  ctx.log.warn({ clientId: client.id, topic: subscription.topic, limit: subscriptions.max }, 'subscription refused: MAX_SUBSCRIPTIONS reached');
  callback(null, null); // SUBACK 128
}

function toBuffer(packet: PublishPacket): Buffer {
  return Buffer.isBuffer(packet.payload) ? packet.payload : Buffer.from(packet.payload);
}
