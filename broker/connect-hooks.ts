// The Aedes hooks a CONNECT passes: preConnect notes what the packet asks for, authenticate
// decides who the client is (or refuses it with a CONNACK code, logged without the password).
import type { AedesOptions, AuthenticateError, Client } from 'aedes';
import { mayPublish } from './acl.js';
import type { BrokerContext } from './context.js';
import { NOT_AUTHORIZED, SERVER_UNAVAILABLE, type Identifier } from './identify.js';
import { withoutPrototype } from './prototype-less.js';
import { loggedTopic, refuseLongUnsubscribes, topicTooLong } from './topic-length.js';

type ConnectHooks = Required<Pick<AedesOptions, 'preConnect' | 'authenticate'>>;
type Done = Parameters<ConnectHooks['authenticate']>[3];

const authError = (returnCode: number, message: string): AuthenticateError => Object.assign(new Error(message), { returnCode }) as AuthenticateError;

/** What a CONNECT is checked against besides the client's identity. */
export interface ConnectLimits {
  /** The broker's client count (MAX_CONNECTIONS). */
  connectedClients(): number;
  /** False while the sessions' store (Redis) is out of reach: a CONNECT would only wait for it. */
  available(): boolean;
  /** MAX_TOPIC_LENGTH, for the Will and for UNSUBSCRIBE (which has no Aedes hook). */
  maxTopicLength: number;
}

export function connectHooks(ctx: BrokerContext, identifier: Identifier, limits: ConnectLimits): ConnectHooks {
  return {
    preConnect(client, packet, callback) {
      if (packet.properties?.requestProblemInformation === false) ctx.quiet.add(client);
      withoutPrototype(client, 'subscriptions', 'duplicates');
      refuseLongUnsubscribes(client, limits.maxTopicLength, (filter) => {
        ctx.refusals.subscribe += 1;
        ctx.log.warn(
          { clientId: client.id, ...loggedTopic(filter), limit: limits.maxTopicLength },
          'unsubscribe refused: filter longer than MAX_TOPIC_LENGTH, connection dropped',
        );
      });
      ctx.connectPackets.set(client, packet);
      callback(null, true);
    },

    authenticate(client, username, password, done) {
      const refuse = refuser(ctx, client, username, done);
      // About the bridge, not the client: one line for every client refused so.
      if (limits.connectedClients() >= ctx.config.maxConnections) return refuse(SERVER_UNAVAILABLE, 'MAX_CONNECTIONS reached', false);
      if (!limits.available()) return refuse(SERVER_UNAVAILABLE, 'Redis is unreachable: sessions cannot be opened', false);
      identifier.identify(client, username, password).then(
        (result) => {
          if ('code' in result) return refuse(result.code, result.reason);
          const will = ctx.connectPackets.get(client)?.will;
          ctx.connectPackets.delete(client);
          if (will && topicTooLong(will.topic, limits.maxTopicLength))
            return refuse(NOT_AUTHORIZED, `will topic longer than MAX_TOPIC_LENGTH (${limits.maxTopicLength} bytes)`);
          if (will && !mayPublish(result, will.topic)) return refuse(NOT_AUTHORIZED, `will topic ${will.topic} is not allowed`);
          ctx.identities.set(client, result);
          done(null, true);
        },
        (err: unknown) => {
          ctx.log.error({ err, clientId: client.id }, 'authentication failed');
          refuse(SERVER_UNAVAILABLE, 'authentication failed');
        },
      );
    },
  };
}

/** Refuses the CONNECT with a code, counted and logged. */
function refuser(ctx: BrokerContext, client: Client, username: string | undefined, done: Done) {
  return (code: number, reason: string, perClient = true): void => {
    ctx.refusals.connect += 1;
    const address = ctx.connections.get(client.conn)?.address;
    // Never the password: only who tried, from where, and why it failed.
    ctx.refusalLog.refused(perClient ? client.id : undefined, reason, { clientId: client.id, username, address, reason }, 'connection refused');
    done(authError(code, reason), false);
  };
}
