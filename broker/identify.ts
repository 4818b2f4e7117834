// Resolves who a connecting client is: AUTH_FILE credentials (behind the failed-login
// throttle), else an mTLS certificate, else (when allowed) its client id alone.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from 'aedes';
import { deviceIdOfClientId, DEVICE_ID_PATTERN } from '../contract/index.js';
import type { Identity } from './acl.js';
import {
  authenticateAnonymous,
  clientIdBelongsTo,
  hashPassword,
  loadAuthFile,
  LoginThrottle,
  verifyPassword,
  type ThrottleOptions,
  type User,
} from './auth.js';
import type { BrokerContext } from './context.js';

// CONNACK return codes (MQTT 3.1.1; mqtt.js maps them to v5 reason codes for v5 clients).
export const SERVER_UNAVAILABLE = 3;
const IDENTIFIER_REJECTED = 2;
const BAD_CREDENTIALS = 4;
export const NOT_AUTHORIZED = 5;

/** A CONNACK code and the reason the client is refused. */
export interface Refused {
  code: number;
  reason: string;
}

export type ReloadResult = { ok: true; users: number } | { ok: false; error: string };

/** Device ids remembered from client certificates; the oldest is forgotten past this many. */
const CERTIFIED_IDS_MAX = 100_000;

export class Identifier {
  /** The device ids of AUTH_FILE's users (rebuilt on reload). */
  private fileDevices: Set<string>;
  /**
   * Device ids a verified client certificate named on this instance since it started: which
   * names the CA certifies cannot be listed, so these are all that is known of them.
   */
  private readonly certified = new Map<string, true>();

  private constructor(
    private readonly ctx: BrokerContext,
    private readonly throttle: LoginThrottle,
    /** Replaced on reload; undefined without AUTH_FILE. */
    private users: Map<string, User> | undefined,
    /** Unknown users are checked against this hash so they take as long as known ones. */
    private readonly decoyHash: string,
  ) {
    this.fileDevices = deviceIdsOf(users);
  }

  /** A bad AUTH_FILE stops the start (ConfigError naming AUTH_FILE, exit 2 in main). */
  static async create(ctx: BrokerContext, throttle: ThrottleOptions): Promise<Identifier> {
    const { authFile } = ctx.config;
    const loginThrottle = new LoginThrottle(throttle);
    const users = authFile === undefined ? undefined : loadAuthFile(authFile);
    if (users) ctx.log.info({ authFile, users: users.size }, 'credentials loaded');
    if (ctx.config.tlsCaFile !== undefined && ctx.config.allowAnonymous) {
      ctx.log.warn(
        'client certificates (TLS_CA_FILE) with anonymous clients allowed: an anonymous client may use the id of a certificate device that has not yet connected to this instance; set ALLOW_ANONYMOUS=false',
      );
    }
    return new Identifier(ctx, loginThrottle, users, users ? await hashPassword('decoy') : '');
  }

  async identify(client: Client, username: string | undefined, password: Readonly<Buffer> | undefined): Promise<Identity | Refused> {
    const info = this.ctx.connections.get(client.conn);
    if (username !== undefined) return this.byCredentials(client, info?.address ?? 'unknown', username, password);
    if (info?.certIdentity !== undefined) return this.byCertificate(client, info.certIdentity);
    return this.anonymous(client);
  }

  /** An anonymous client is a device, but never one that has credentials (a file user or a certificate). */
  private anonymous(client: Client): Identity | Refused {
    if (!this.ctx.config.allowAnonymous) return { code: NOT_AUTHORIZED, reason: 'anonymous clients are not allowed' };
    const identity = authenticateAnonymous(client.id);
    if (!identity) return { code: IDENTIFIER_REJECTED, reason: 'client id does not start with a valid device id' };
    const deviceId = identity.deviceId as string;
    if (this.hasCredentials(deviceId)) return { code: NOT_AUTHORIZED, reason: `device ${deviceId} has credentials: anonymous clients may not use its id` };
    return identity;
  }

  private hasCredentials(deviceId: string): boolean {
    return this.fileDevices.has(deviceId) || this.certified.has(deviceId);
  }

  private byCertificate(client: Client, deviceId: string): Identity | Refused {
    const result = byCertificate(client, deviceId);
    if ('role' in result) this.remember(deviceId);
    return result;
  }

  private remember(deviceId: string): void {
    this.certified.delete(deviceId);
    this.certified.set(deviceId, true);
    if (this.certified.size > CERTIFIED_IDS_MAX) this.certified.delete(this.certified.keys().next().value as string);
  }

  /** Re-reads AUTH_FILE; a bad file keeps the users already loaded. */
  reload(): ReloadResult {
    const { authFile } = this.ctx.config;
    if (authFile === undefined) return { ok: true, users: 0 };
    try {
      this.users = loadAuthFile(authFile);
      this.fileDevices = deviceIdsOf(this.users);
      this.ctx.log.info({ authFile, users: this.users.size }, 'auth file reloaded');
      return { ok: true, users: this.users.size };
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      this.ctx.log.error({ authFile, err: error }, 'auth file reload failed: keeping the users already loaded');
      return { ok: false, error };
    }
  }

  private async byCredentials(client: Client, address: string, username: string, password: Readonly<Buffer> | undefined): Promise<Identity | Refused> {
    if (!this.users) return { code: BAD_CREDENTIALS, reason: 'credentials given but no AUTH_FILE is configured' };
    const throttled = await this.waitForThrottle(client, address);
    if (throttled) return throttled;
    // Read after the wait: a reload in between applies to this login.
    const user = this.users.get(username);
    const ok = await verifyPassword(password ?? Buffer.alloc(0), user?.passwordHash ?? this.decoyHash);
    if (!user || !ok) {
      this.throttle.fail(address);
      this.ctx.refusals.login += 1;
      return { code: BAD_CREDENTIALS, reason: user ? 'wrong password' : 'unknown user' };
    }
    if (user.role === 'device') {
      const deviceId = user.deviceId as string; // the schema requires it for devices
      if (!clientIdBelongsTo(client.id, deviceId)) {
        return { code: IDENTIFIER_REJECTED, reason: `client id must be ${deviceId} or begin with ${deviceId}.` };
      }
      return { role: 'device', deviceId };
    }
    return this.notADevicesClientId(client) ?? { role: user.role, deviceId: undefined };
  }

  /** Refuses an address that failed too often; delays one that is close to it. */
  private async waitForThrottle(client: Client, address: string): Promise<Refused | undefined> {
    const wait = this.throttle.admit(address);
    if (wait === null) {
      this.ctx.refusals.throttled += 1;
      return { code: SERVER_UNAVAILABLE, reason: 'too many failed logins from this address: try later' };
    }
    if (wait > 0) {
      this.ctx.refusals.throttled += 1;
      this.ctx.log.warn({ clientId: client.id, address, delayMs: wait }, 'login delayed: too many failed logins from this address');
      await sleep(wait);
    }
    return undefined;
  }

  /**
   * Observers and operators pick their own client ids, but never a registered device's:
   * taking that id would end the device's session (Aedes drops the older connection).
   */
  private notADevicesClientId(client: Client): Refused | undefined {
    const claimed = deviceIdOfClientId(client.id);
    if (claimed !== null && this.hasCredentials(claimed)) {
      return { code: IDENTIFIER_REJECTED, reason: `client id ${client.id} belongs to device ${claimed}` };
    }
    return undefined;
  }
}

function deviceIdsOf(users: Map<string, User> | undefined): Set<string> {
  return new Set([...(users?.values() ?? [])].flatMap((u) => (u.deviceId === undefined ? [] : [u.deviceId])));
}

function byCertificate(client: Client, deviceId: string): Identity | Refused {
  if (!DEVICE_ID_PATTERN.test(deviceId)) return { code: NOT_AUTHORIZED, reason: `certificate name ${deviceId} is not a device id` };
  if (!clientIdBelongsTo(client.id, deviceId)) {
    return { code: IDENTIFIER_REJECTED, reason: `client id must be ${deviceId} or begin with ${deviceId}. (certificate)` };
  }
  return { role: 'device', deviceId };
}
