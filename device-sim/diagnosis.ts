// What the devices saw besides replies: the bridge's status, refused connections,
// subscriptions and publishes, and connections the broker dropped; and the hints drawn from
// it when requests go unanswered. Pure bookkeeping, shared by every engine.
import { ReasonCodes } from 'mqtt';
import { StatusSchema } from '../contract/index.js';

export interface Diagnosis {
  /** Whether a device read bridge/+/status (false: this engine does not watch it). */
  statusWatched: boolean;
  /** Bridges whose status a device read: instance id → `online` or `offline`. */
  bridges: Record<string, string>;
  /** The broker refused the devices' subscription to bridge/+/status. */
  statusRefused: boolean;
  /** Connects (and reconnects) that failed, and the first, as `device: what happened`. */
  connectFailures: number;
  firstConnectFailure?: string;
  /** Result topics the broker would not let a device subscribe to. */
  subscriptionsRefused: number;
  firstSubscriptionRefused?: string;
  /** Publishes the broker refused, by MQTT 5 PUBACK reason (`0x87 Not authorized`). */
  publishesRefused: Record<string, number>;
  firstPublishRefused?: string;
  /** Connections the broker closed during the run, and the first reason. */
  disconnects: number;
  firstDisconnect?: string;
}

/** Error codes the devices give their own failed publishes: no bridge answered those. */
const NOT_ANSWERS = new Set(['publish_failed', 'publish_refused']);

/** Requests a bridge answered, ok or with an error reply. */
export function answeredOf(ok: number, errors: Record<string, number>): number {
  return Object.entries(errors).reduce((n, [code, count]) => (NOT_ANSWERS.has(code) ? n : n + count), ok);
}

export function emptyDiagnosis(statusWatched: boolean): Diagnosis {
  return { statusWatched, bridges: {}, statusRefused: false, connectFailures: 0, subscriptionsRefused: 0, publishesRefused: {}, disconnects: 0 };
}

/** An MQTT reason code as `0x87 Not authorized`. */
export function reasonName(code: number): string {
  const name = (ReasonCodes as Record<number, string | undefined>)[code];
  return `0x${code.toString(16).padStart(2, '0')}${name === undefined ? '' : ` ${name}`}`;
}

/** A message on bridge/+/status: remembers the instance's state. */
export function noteStatus(d: Diagnosis, payload: Buffer): void {
  try {
    const status = StatusSchema.parse(JSON.parse(payload.toString('utf8')));
    d.bridges[status.instance] = status.state;
  } catch {
    // Not a bridge's status: nothing to learn from it.
  }
}

export function noteConnectFailure(d: Diagnosis, deviceId: string, message: string): void {
  d.connectFailures += 1;
  d.firstConnectFailure ??= `${deviceId}: ${message}`;
}

export function noteSubscriptionRefused(d: Diagnosis, deviceId: string, topic: string, code: number): void {
  d.subscriptionsRefused += 1;
  d.firstSubscriptionRefused ??= `${deviceId}: ${topic} (SUBACK ${reasonName(code)})`;
}

export function notePublishRefused(d: Diagnosis, deviceId: string, code: number, reasonString?: string): void {
  const reason = reasonName(code);
  d.publishesRefused[reason] = (d.publishesRefused[reason] ?? 0) + 1;
  d.firstPublishRefused ??= `${deviceId}: PUBACK ${reason}${reasonString === undefined ? '' : ` "${reasonString}"`}`;
}

export function noteDisconnect(d: Diagnosis, deviceId: string, reason: string): void {
  d.disconnects += 1;
  d.firstDisconnect ??= `${deviceId}: ${reason}`;
}

/** Why a first connect failed, in words that say what to do: the host:port refusing, or the login refused. */
export function describeConnectError(err: unknown, url: string, username: string | undefined): string {
  const e = err as { code?: unknown; message?: unknown };
  const message = typeof e.message === 'string' ? e.message : String(err);
  const { host } = new URL(url);
  const where = host.includes(':') ? host : `${host}:${defaultPort(url)}`;
  if (e.code === 'ECONNREFUSED') return `connection refused by ${where}: nothing listens there (start the bridge, or point --url at its broker)`;
  if (e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN') return `cannot resolve ${where}: ${message}`;
  if (typeof e.code === 'number') {
    const who = username === undefined ? 'an anonymous login' : `the login of user "${username}"`;
    return `the broker at ${where} refused ${who}: ${message} (CONNACK ${e.code}); check --username, --password or --password-file`;
  }
  return `${where}: ${message}`;
}

function defaultPort(url: string): number {
  const protocol = new URL(url).protocol;
  return { 'mqtts:': 8883, 'tls:': 8883, 'ws:': 80, 'wss:': 443 }[protocol] ?? 1883;
}

/**
 * What to tell the tester: every refusal and drop; and when nothing was answered, whether a
 * bridge's status was seen (a broker ACL may hide bridge/+/status from devices, so the
 * absence is a hint, not a verdict).
 */
export function hints(d: Diagnosis, answered: number): string[] {
  const out: string[] = [];
  if (d.connectFailures > 0) out.push(`${d.connectFailures} reconnect(s) failed (first: ${d.firstConnectFailure})`);
  if (d.subscriptionsRefused > 0) {
    out.push(
      `the broker refused ${d.subscriptionsRefused} device(s) their result topic (first: ${d.firstSubscriptionRefused}): they cannot receive answers; the login may not read devices/{id}/result`,
    );
  }
  const refused = Object.entries(d.publishesRefused);
  if (refused.length > 0) {
    const counts = refused.map(([reason, n]) => `${n} × ${reason}`).join(', ');
    out.push(`the broker refused publishes: ${counts} (first: ${d.firstPublishRefused})`);
  }
  if (d.disconnects > 0) {
    out.push(
      `the broker closed ${d.disconnects} connection(s) during the run (first: ${d.firstDisconnect}); on MQTT 3.1.1 a refused publish closes the connection (--mqtt5 shows the reason)`,
    );
  }
  if (answered > 0) return out;
  const bridges = Object.entries(d.bridges);
  if (d.statusRefused) out.push('no answer; the devices may not read bridge/+/status, so whether a bridge is there is unknown');
  else if (!d.statusWatched) out.push('no answer at all');
  else if (bridges.length === 0) {
    out.push('no answer and no bridge status seen on bridge/+/status: no bridge is joined to this broker (or its ACL hides bridge/+/status from devices)');
  } else if (bridges.every(([, state]) => state !== 'online')) {
    out.push(`no answer; every bridge seen is offline (${bridges.map(([id]) => id).join(', ')})`);
  } else {
    out.push(
      `no answer although bridge ${bridges
        .filter(([, s]) => s === 'online')
        .map(([id]) => id)
        .join(', ')} is online: see its log (upstream, budgets, rate limits)`,
    );
  }
  return out;
}
