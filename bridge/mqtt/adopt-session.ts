// One broker session of a dead instance, adopted (recovery/adoption.ts decides when): the
// bridge connects with that instance's client id and the same persistent session, leaves the
// share group at once so the broker queues nothing more there, admits what the session held
// through the normal intake (idempotent per request), and once nothing more has arrived for a
// while ends the session (MQTT 5 DISCONNECT with Session Expiry Interval 0).
//
// It never reconnects: when the instance itself comes back it connects with the same client id
// and the broker hands the session over to it (client-id takeover), which ends the adoption.
// What was delivered here and not yet acknowledged stays in the session for it.
import { setTimeout as sleep } from 'node:timers/promises';
import mqtt, { type IClientOptions, type IConnackPacket, type MqttClient } from 'mqtt';
import type { Logger } from 'pino';
import { PUBACK_REASON, type PubackRefusal, type RequestHandler } from '../../contract/index.js';
import { AdmissionCount, admissionHooks, clientOptions, type ExternalBrokerOptions } from './external-connection.js';

/** MQTT 5 DISCONNECT reason: another connection took the client id. */
const SESSION_TAKEN_OVER = 0x8e;
const CONNECT_TIMEOUT_MS = 10_000;
/** Never sent (the connection is closed): the request is left unacknowledged for the session's new holder. */
const LEFT_TO_NEW_HOLDER: PubackRefusal = { reasonCode: PUBACK_REASON.implementationSpecificError, reasonString: 'session taken over' };

/**
 * How an adoption of one session ended: `ended` drained and ended; `taken_over` by another
 * connection with the client id (the instance is back); `stopped` as asked, the session kept;
 * `lost` the connection dropped; `refused` the broker refused the CONNECT.
 */
export type AdoptionOutcome = 'ended' | 'taken_over' | 'stopped' | 'lost' | 'refused';

export interface AdoptSessionOptions {
  clientId: string;
  /** The shared subscriptions the session holds (the group's). */
  filters: string[];
  sessionExpiryS: number;
  onRequest: RequestHandler;
  /** Asked before the session is ended: still ours to end (the adoption claim holds)? */
  stillOurs: () => Promise<boolean>;
  /** Aborted: stop now and keep the session (shutdown, or the claim was lost). */
  signal: AbortSignal;
  /** Nothing arrived for this long after leaving the group: the session holds nothing more. */
  quietMs: number;
  log: Logger;
}

export interface AdoptedSession {
  outcome: AdoptionOutcome;
  /** Requests handed to admission from this session. */
  received: number;
  /** Whether the broker still had the session (false: expired, or already ended). */
  sessionPresent: boolean;
}

export async function adoptSession(broker: ExternalBrokerOptions, o: AdoptSessionOptions): Promise<AdoptedSession> {
  const log = o.log.child({ clientId: o.clientId });
  const admissions = new AdmissionCount();
  let received = 0;
  let isClosed = false;
  const hooks = admissionHooks(
    async (request) => {
      // Taken over: what was still buffered here is the new holder's, delivered there again.
      if (isClosed) return LEFT_TO_NEW_HOLDER;
      received += 1;
      // Whoever held this session may have admitted and answered any of its requests (and the
      // instance taking it back receives what is not acknowledged here): a request found
      // answered is not answered again from an adopted session.
      return o.onRequest({ ...request, redelivered: true });
    },
    admissions,
    log,
  );
  const client = mqtt.connect(broker.brokerUrl, adoptionOptions(broker, o, hooks.customHandleAcks));
  client.on('message', hooks.onMessage);
  let refused = false;
  client.on('error', (err: Error & { code?: unknown }) => {
    refused ||= typeof err.code === 'number'; // a CONNACK's reason code, not a network error
    log.debug({ err: err.message }, 'adopted session: connection error');
  });
  let takenOver = false;
  client.on('disconnect', (packet) => (takenOver ||= packet.reasonCode === SESSION_TAKEN_OVER));
  const closed = new Promise<void>((resolve) =>
    client.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  const connack = await firstConnack(client, closed);
  if (connack === undefined) {
    client.end(true);
    return { outcome: refused ? 'refused' : 'lost', received, sessionPresent: false };
  }
  const sessionPresent = connack.sessionPresent;
  log.info({ sessionPresent }, "connected with a dead instance's client id: admitting what its session holds");
  const outcome = await drain(client, o, admissions, { closed, isClosed: () => isClosed, takenOver: () => takenOver });
  return { outcome, received, sessionPresent };
}

/** Leaves the group, admits until quiet, then ends the session if it is still ours. */
async function drain(
  client: MqttClient,
  o: AdoptSessionOptions,
  admissions: AdmissionCount,
  connection: { closed: Promise<void>; isClosed(): boolean; takenOver(): boolean },
): Promise<AdoptionOutcome> {
  const gone = (): AdoptionOutcome => (connection.takenOver() ? 'taken_over' : 'lost');
  // The instance may have started again while this connected (and this took its session from it).
  if (!(await o.stillOurs().catch(() => false))) return connection.isClosed() ? gone() : keep(client, 'stopped');
  // Queued messages are delivered after an UNSUBSCRIBE as before it: only new ones stop. A
  // session without the subscription (a fresh one) answers "no subscription existed": fine too.
  await Promise.race([client.unsubscribeAsync(o.filters).catch(() => undefined), connection.closed]);
  const since = Date.now();
  while (!connection.isClosed() && !o.signal.aborted && !admissions.quietFor(o.quietMs, since)) await sleep(50);
  if (connection.isClosed()) return gone();
  if (o.signal.aborted) return keep(client, 'stopped');
  if (!(await o.stillOurs().catch(() => false))) return keep(client, 'stopped');
  await client.endAsync(false, { properties: { sessionExpiryInterval: 0 } });
  return 'ended';
}

/** A normal DISCONNECT: the session stays in the broker with whatever it still holds. */
async function keep(client: MqttClient, outcome: AdoptionOutcome): Promise<AdoptionOutcome> {
  await client.endAsync(false).catch(() => client.end(true));
  return outcome;
}

function adoptionOptions(
  broker: ExternalBrokerOptions,
  o: AdoptSessionOptions,
  customHandleAcks: NonNullable<IClientOptions['customHandleAcks']>,
): IClientOptions {
  const base = clientOptions({ ...broker, brokerSessionExpiryS: o.sessionExpiryS }, { clientId: o.clientId });
  // No reconnection: a second connect would take the session back from the instance itself.
  return { ...base, reconnectPeriod: 0, connectTimeout: CONNECT_TIMEOUT_MS, customHandleAcks };
}

/** The CONNACK, or undefined when the broker refused or the connection closed first. */
function firstConnack(client: MqttClient, closed: Promise<void>): Promise<IConnackPacket | undefined> {
  return Promise.race([new Promise<IConnackPacket>((resolve) => client.once('connect', resolve)), closed.then(() => undefined)]);
}
