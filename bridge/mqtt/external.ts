// The broker port over the plant's own broker (BROKER_URL): the bridge joins it as MQTT 5
// clients with stable client ids and persistent sessions, members of one shared subscription
// so several instances split the requests. A request's PUBACK goes to the broker only once
// the request is admitted: a bridge killed before that leaves it unacknowledged in its
// session, and the broker delivers it again when the same client id comes back.
import type { Logger } from 'pino';
import { topics, type Publish, type RequestHandler } from '../../contract/index.js';
import { AdmissionCount, openConnection, redactUrl, type BrokerConnection, type ExternalBrokerOptions, type StatusMessages } from './external-connection.js';
import type { MqttPort } from './port.js';
import { RepeatingLog, type RepeatingLogOptions } from '../repeating-log.js';

export type { ExternalBrokerOptions, StatusMessages } from './external-connection.js';

export interface ExternalOptions extends ExternalBrokerOptions {
  /** Connections per instance: admissions run in parallel across them, one at a time on each. */
  brokerConnections: number;
}

export interface ExternalPort extends MqttPort {
  readonly mode: 'external';
}

/** On a graceful stop: how long no request must arrive before the broker is taken to have sent its last. */
const QUIET_MS = 200;
const QUIESCE_MAX_MS = 5000;

/** The requests' shared subscription, then the raw images'. */
export function sharedSubscriptions(group: string): string[] {
  return [`$share/${group}/${topics.inferWildcard}`, `$share/${group}/${topics.imageWildcard}`];
}

/**
 * The client id of connection `index`: the instance id itself for the first, so a single
 * connection keeps the name it always had, then `{instanceId}-{index}`.
 */
export const connectionClientId = (instanceId: string, index: number): string => (index === 0 ? instanceId : `${instanceId}-${index}`);

/**
 * Opens the instance's connections; resolves on their first CONNACKs (or first failed
 * attempts: the bridge then starts unready and keeps trying). `connected()` is true while
 * every connection is up and holds the shared subscription.
 */
export async function openExternal(
  options: ExternalOptions,
  instanceId: string,
  status: StatusMessages,
  onRequest: RequestHandler,
  logger: Logger,
  repeatLog: RepeatingLogOptions = {},
): Promise<ExternalPort> {
  const log = logger.child({ module: 'external-broker', broker: redactUrl(options.brokerUrl) });
  const filters = sharedSubscriptions(options.brokerShareGroup);
  const admissions = new AdmissionCount();
  const unreachable = new RepeatingLog(
    log,
    {
      started: 'broker unreachable: unready, retrying; requests wait in the broker meanwhile',
      repeating: 'broker still unreachable',
      ended: 'broker reachable again',
    },
    repeatLog,
  );
  const settled = await Promise.allSettled(
    Array.from({ length: options.brokerConnections }, (_, index) =>
      openConnection(options, {
        clientId: connectionClientId(instanceId, index),
        filters,
        status: index === 0 ? status : undefined,
        onRequest,
        admissions,
        log,
        unreachable,
      }),
    ),
  );
  const connections = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const refused = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (refused) {
    await Promise.all(connections.map((c) => c.client.endAsync(true)));
    throw refused.reason;
  }
  const [first] = connections as [BrokerConnection, ...BrokerConnection[]];

  const publish: Publish = async (topic, payload, { qos, retain, properties }) => {
    // While the connection is down mqtt.js keeps the publish and sends it once it is back.
    await first.client.publishAsync(topic, payload, { qos, retain, ...(properties ? { properties } : {}) });
  };
  return {
    mode: 'external',
    publish,
    connected: () => connections.every((c) => c.ready()),
    clientIds: () => [],
    clientCount: () => 0,
    refusals: () => ({ publish: 0, subscribe: 0, connect: 0, slow: { backlog: 0, drain_timeout: 0 } }),
    ports: {},
    reloadAuth: () => log.info('AUTH_FILE does not apply with BROKER_URL: the broker authenticates devices'),
    async quiesce() {
      // Unsubscribed, the broker gives this instance's share to the others at once; what it
      // already delivered here is admitted before the bridge stops taking requests.
      await Promise.all(connections.map((c) => c.unsubscribe()));
      await admissions.quiet(QUIET_MS, QUIESCE_MAX_MS);
      log.info('unsubscribed: the other instances of the share group take the requests');
    },
    async close() {
      unreachable.silence();
      // Clean DISCONNECTs: the Will is not sent, the app publishes `offline` itself.
      await Promise.all(connections.map((c) => c.client.endAsync()));
    },
  };
}
