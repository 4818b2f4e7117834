// The bounds on persistent sessions (clean=false, or an MQTT 5 Session Expiry above 0):
// - at CONNECT, a device (its client ids `id` and `id.*`) holds at most MAX_SESSIONS_PER_DEVICE
//   of them: a new one past that is refused (MQTT 5 CONNACK 0x97 Quota exceeded, 3.1.1 return
//   code 3 Server unavailable) while the device's existing sessions resume as before;
// - every session expires MAX_SESSION_EXPIRY_S after its client left (3.1.1 ones too, which
//   Aedes keeps for ever), or its granted MQTT 5 expiry: a sweeper ends it, its queue and
//   subscriptions deleted. While connected, each instance refreshes its clients' expiry.
import type { Aedes, AedesOptions, AuthenticateError, Client } from 'aedes';
import mqttPacket from 'mqtt-packet';
import type { Logger } from 'pino';
import { boundPersistence, type OfflineCounts, type OfflineLimits } from './bounded-persistence.js';
import { deviceOfClientId, type SessionBackend } from './session-backend.js';
import type { ConnectionReport } from './connection-report.js';

type Authenticate = Required<AedesOptions>['authenticate'];
/** What Aedes 2.0.0-beta.1 has and its types do not declare. */
type AedesInternals = Aedes & {
  persistence: { cleanSubscriptions(client: { id: string; clean: boolean }): Promise<unknown> };
  readonly clients: Record<string, Client>;
};

export interface SessionLimitsConfig extends OfflineLimits {
  readonly maxSessionsPerDevice: number;
  readonly maxSessionExpiryS: number;
}

/** Counts for metrics. */
export interface SessionStats extends OfflineCounts {
  /** Messages queued for persistent sessions, deployment-wide, as last sampled. */
  offlineMessages: number;
  /** Persistent sessions refused at CONNECT (MAX_SESSIONS_PER_DEVICE). */
  refused: number;
  /** Sessions ended by the sweeper after their expiry. */
  expired: number;
}

const QUOTA_EXCEEDED = 0x97;
const SERVER_UNAVAILABLE = 3;
/** Sessions ended per sweeper round; the rest wait for the next round. */
const CLAIM_BATCH = 100;

export class SessionLimits {
  readonly stats: SessionStats = { offlineMessages: 0, refused: 0, expired: 0, dropped: { queue_full: 0, expired: 0 } };
  /** How often the sweeper runs: often enough for the shortest expiry, at most every 10 s. */
  private readonly tickMs: number;
  private readonly admitted = new WeakSet<Client>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private aedes: AedesInternals | undefined;

  constructor(
    private readonly backend: SessionBackend,
    private readonly config: SessionLimitsConfig,
    private readonly log: Logger,
    /** Counts a refused CONNECT with the broker's other refusals. */
    private readonly onRefused: () => void,
    /** Where a sweep failing for Redis goes (the cluster's report); without one, each is a warning. */
    private readonly report?: ConnectionReport,
  ) {
    this.tickMs = Math.min(10_000, Math.max(100, (config.maxSessionExpiryS * 1000) / 4));
  }

  /** The connect hooks, with the per-device cap applied once authenticate knows the client. */
  guard<H extends { authenticate: Authenticate }>(hooks: H): H {
    return { ...hooks, authenticate: this.guarded(hooks.authenticate) };
  }

  private guarded(authenticate: Authenticate): Authenticate {
    return (client, username, password, done) =>
      authenticate(client, username, password, (err, ok) => {
        if (err || !ok || client.clean !== false) return done(err, ok);
        this.admit(client).then(
          (admitted) => (admitted ? done(null, true) : this.refuse(client, done)),
          (error: unknown) => {
            this.onRefused();
            this.log.warn({ clientId: client.id, err: error }, 'persistent session not registered: refused');
            done(Object.assign(new Error('session register unavailable'), { returnCode: SERVER_UNAVAILABLE }) as AuthenticateError, false);
          },
        );
      });
  }

  /**
   * Bounds the broker's persistence, follows connects and disconnects, registers the sessions
   * kept from before, and starts the sweeper.
   */
  async start(aedes: Aedes): Promise<void> {
    const internals = aedes as AedesInternals;
    this.aedes = internals;
    const onError = (err: unknown): void => this.log.warn({ err }, 'offline queue not trimmed');
    internals.persistence = boundPersistence(internals.persistence, this.backend, this.config, this.stats, onError);
    aedes.on('client', (client) => {
      if (this.admitted.has(client)) this.touch([client.id], this.connectedExpiry());
    });
    aedes.on('clientDisconnect', (client) => {
      if (this.admitted.has(client)) this.touch([client.id], Date.now() + Math.max(this.expiryMsOf(client), 3 * this.tickMs));
    });
    // Aedes ended an MQTT 5 session on time on this instance: the sweeper has nothing left to do.
    aedes.on('sessionExpired', (client) => {
      this.stats.expired += 1;
      this.backend.remove(client.id).catch((err: unknown) => this.log.warn({ err }, 'expired session not unregistered'));
    });
    await this.adopt();
    this.schedule();
  }

  /** Sessions kept from before these bounds get the longest expiry from now. */
  private async adopt(): Promise<void> {
    try {
      const adopted = await this.backend.adopt?.(Date.now() + this.config.maxSessionExpiryS * 1000);
      if (adopted) this.log.info({ sessions: adopted }, 'persistent sessions kept from before now expire after MAX_SESSION_EXPIRY_S');
    } catch (err) {
      this.log.warn({ err }, 'persistent sessions kept from before not registered: they expire once their clients come back');
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async admit(client: Client): Promise<boolean> {
    const ok = await this.backend.open(client.id, this.config.maxSessionsPerDevice, this.connectedExpiry());
    if (ok) this.admitted.add(client);
    return ok;
  }

  /** MQTT 5 gets Quota exceeded written here (Aedes can only send the 3.1.1 codes); both are closed by Aedes. */
  private refuse(client: Client, done: Parameters<Authenticate>[3]): void {
    const deviceId = deviceOfClientId(client.id);
    const reason = `device ${deviceId} already holds MAX_SESSIONS_PER_DEVICE (${this.config.maxSessionsPerDevice}) persistent sessions`;
    this.stats.refused += 1;
    this.onRefused();
    this.log.warn({ clientId: client.id, deviceId }, 'persistent session refused: MAX_SESSIONS_PER_DEVICE reached');
    const raw = client as unknown as { conn: NodeJS.WritableStream & { writable?: boolean }; connecting: boolean };
    if (client.version === 5 && raw.conn.writable) {
      const connack = { cmd: 'connack' as const, sessionPresent: false, reasonCode: QUOTA_EXCEEDED, properties: { reasonString: reason } };
      raw.conn.write(mqttPacket.generate(connack, { protocolVersion: 5 }));
      // Aedes writes no CONNACK of its own to a client no longer connecting (lib/write.js).
      raw.connecting = false;
    }
    done(Object.assign(new Error(reason), { returnCode: SERVER_UNAVAILABLE }) as AuthenticateError, false);
  }

  private expiryMsOf(client: Client): number {
    const seconds = client.version === 5 ? Math.min(client.sessionExpiryInterval, this.config.maxSessionExpiryS) : this.config.maxSessionExpiryS;
    return seconds * 1000;
  }

  /** A connected session's expiry: past the next heartbeats of the instance holding it. */
  private connectedExpiry(): number {
    return Date.now() + Math.max(this.config.maxSessionExpiryS * 1000, 3 * this.tickMs);
  }

  private touch(clientIds: string[], expiresAt: number): void {
    // Closing: the connections' expiries already run past this instance's last heartbeat.
    if (this.stopped) return;
    this.backend.touch(clientIds, expiresAt).catch((err: unknown) => this.log.warn({ err }, 'session expiry not updated'));
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.sweep()
        .then(
          () => this.report?.ok('session sweep'),
          (err: unknown) => (this.report ? this.report.fail('session sweep', err) : this.log.warn({ err }, 'session sweep failed')),
        )
        .finally(() => this.schedule());
    }, this.tickMs);
    this.timer.unref();
  }

  /** Refreshes this instance's connected sessions, ends the expired ones, samples the queues. */
  private async sweep(): Promise<void> {
    const aedes = this.aedes as AedesInternals;
    const connected = Object.values(aedes.clients).filter((c) => this.admitted.has(c));
    await this.backend.touch(
      connected.map((c) => c.id),
      this.connectedExpiry(),
    );
    for (let round = 0; round < 10 && !this.stopped; round += 1) {
      const due = await this.backend.claimExpired(Date.now(), CLAIM_BATCH);
      for (const id of due) await this.end(id);
      if (due.length < CLAIM_BATCH) break;
    }
    this.stats.offlineMessages = await this.backend.total();
  }

  private async end(clientId: string): Promise<void> {
    const aedes = this.aedes as AedesInternals;
    const here = aedes.clients[clientId];
    if (here && this.admitted.has(here)) {
      await this.backend.open(clientId, Number.MAX_SAFE_INTEGER, this.connectedExpiry());
      return;
    }
    await aedes.persistence.cleanSubscriptions({ id: clientId, clean: true });
    this.stats.expired += 1;
    this.log.info({ clientId, deviceId: deviceOfClientId(clientId) }, 'persistent session expired');
  }
}
