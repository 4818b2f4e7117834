// The plant's broker (BROKER_URL) with Redis: this instance's liveness lease on its broker
// sessions, registered before it connects, and the adoption of the sessions of an instance
// whose lease lapsed (recovery/liveness.ts, recovery/adoption.ts). With the memory store there
// is one process and nothing to adopt; the embedded broker holds no session of the bridge's.
import type { RequestHandler } from '../contract/index.js';
import type { Closers } from './closers.js';
import type { Config } from './config/config.js';
import type { Coordination } from './coordination.js';
import type { Core } from './core.js';
import type { Logger } from './logger.js';
import { adoptSession } from './mqtt/adopt-session.js';
import { connectionClientId, sharedSubscriptions } from './mqtt/external.js';
import { Adoption } from './recovery/adoption.js';
import { Liveness } from './recovery/liveness.js';

/** After leaving the share group, an adopted session that received nothing for this long holds nothing more. */
const ADOPT_QUIET_MS = 1000;

/** Registers this start (before the first connection: an adoption of this INSTANCE_ID under way then gives way). */
export async function joinLiveness(config: Config, coordination: Coordination, instanceId: string, log: Logger, closers: Closers): Promise<void> {
  const registry = coordination.sessions;
  if (config.brokerUrl === undefined || registry === undefined) return;
  if (config.brokerAdoptAfterMs === 0) {
    // Off: no lease, so nobody adopts this instance; a record an earlier start left goes.
    await registry.leave(instanceId);
    return;
  }
  const clientIds = Array.from({ length: config.brokerConnections }, (_, index) => connectionClientId(instanceId, index));
  const record = { instanceId, group: config.brokerShareGroup, clientIds, sessionExpiryS: config.brokerSessionExpiryS };
  const liveness = await Liveness.join(registry, record, config.brokerAdoptAfterMs, log, coordination.outage);
  // Pushed before the broker's closer, so it runs after it: removed once nothing is left to adopt.
  closers.push('liveness lease', () => liveness.leave());
}

/** Once intake is open: looks for instances whose lease lapsed and adopts their sessions. */
export function startAdoption({ config, coordination, identity, log, closers }: Core, onRequest: RequestHandler): void {
  const { brokerUrl } = config;
  const registry = coordination.sessions;
  if (brokerUrl === undefined || registry === undefined || config.brokerAdoptAfterMs === 0) return;
  const broker = { ...config, brokerUrl };
  const adoption = new Adoption({
    registry,
    instanceId: identity.instanceId,
    owner: identity.owner,
    group: config.brokerShareGroup,
    leaseMs: config.brokerAdoptAfterMs,
    log,
    adopt: (record, clientId, stillOurs, signal) =>
      adoptSession(broker, {
        clientId,
        filters: sharedSubscriptions(record.group),
        sessionExpiryS: record.sessionExpiryS,
        onRequest,
        stillOurs,
        signal,
        quietMs: ADOPT_QUIET_MS,
        log: log.child({ module: 'adoption', dead: record.instanceId }),
      }),
  });
  adoption.start();
  closers.push('adoption', () => adoption.stop());
}
