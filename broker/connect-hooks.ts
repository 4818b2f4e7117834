// The Aedes hooks a CONNECT passes: preConnect notes what the packet asks for, authenticate
// decides who the client is (or refuses it with a CONNACK code, logged without the password).
import type { AedesOptions, AuthenticateError, Client } from 'aedes';
import { mayPublish } from './acl.js';
import type { BrokerContext } from './context.js';
import { NOT_AUTHORIZED, SERVER_UNAVAILABLE, type Identifier } from './identify.js';
import { withoutPrototype } from './prototype-less.js';

type ConnectHooks = Required<Pick<AedesOptions, 'preConnect' | 'authenticate'>>;
type Done = Parameters<ConnectHooks['authenticate']>[3];

const authError = (returnCode: number, message: string): AuthenticateError =>
  Object.assign(new Error(message), { returnCode }) as AuthenticateError;

/** `connectedClients` reads the broker's count (MAX_CONNECTIONS). */
export function connectHooks(ctx: BrokerContext, identifier: Identifier, connectedClients: () => number): ConnectHooks {
  return {
    preConnect(client, packet, callback) {
      if (packet.properties?.requestProblemInformation === false) ctx.quiet.add(client);
      withoutPrototype(client, 'subscriptions', 'duplicates');
      ctx.connectPackets.set(client, packet);
      callback(null, true);
    },

    authenticate(client, username, password, done) {
      const refuse = refuser(ctx, client, username, done);
      if (connectedClients() >= ctx.config.maxConnections) return refuse(SERVER_UNAVAILABLE, 'MAX_CONNECTIONS reached');
      identifier.identify(client, username, password).then(
        (result) => {
          if ('code' in result) return refuse(result.code, result.reason);
          const will = ctx.connectPackets.get(client)?.will;
          ctx.connectPackets.delete(client);
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
  return (code: number, reason: string): void => {
    ctx.refusals.connect += 1;
    const address = ctx.connections.get(client.conn)?.address;
    // Never the password: only who tried, from where, and why it failed.
    ctx.log.warn({ clientId: client.id, username, address, reason }, 'connection refused');
    done(authError(code, reason), false);
  };
}
