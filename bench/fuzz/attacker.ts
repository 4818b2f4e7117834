// One attacker device: an anonymous MQTT 5 connection under its own client id (opened again
// whenever the bridge closes it), and the actions its stream gives it, one after another at
// its rate. Each action is bounded in time, so a stalled bridge slows the attacker down but
// never wedges it.
import { setTimeout as sleep } from 'node:timers/promises';
import { decode as decodeCbor } from 'cbor-x';
import type { IPublishPacket } from 'mqtt-packet';
import type { Action, IdentityAction, Kind, PublishAction, RawAction, SessionAction, SubscribeAction } from './inputs/actions.js';
import { type ActionStream, type InputContext } from './inputs/index.js';
import { Wire } from './wire.js';

const ACK_TIMEOUT_MS = 2000;
const ACTION_TIMEOUT_MS = 15_000;
/** Actions of one attacker under way at once: sessions and raw connections are held open a while. */
const MAX_INFLIGHT = 4;

export interface KindStats {
  iterations: number;
  /** The generator made a packet mqtt-packet cannot encode: sent as far as it could be. */
  unencodable: number;
  /** The bridge closed the attacker's connection during the action. */
  cutOff: number;
  /** No acknowledgement (or CONNACK) within ACK_TIMEOUT_MS. */
  noAck: number;
  /** CONNACK refused the connection (a session or an identity the bridge would not grant). */
  refused: number;
}

export const emptyStats = (): KindStats => ({ iterations: 0, unencodable: 0, cutOff: 0, noAck: 0, refused: 0 });

/** The reply's error code, `ok`, or `unreadable`: JSON or (for a CBOR request) CBOR. */
export function replyCode(payload: Buffer | string): string {
  let reply: unknown;
  try {
    reply = JSON.parse(payload.toString());
  } catch {
    try {
      reply = decodeCbor(Buffer.from(payload));
    } catch {
      return 'unreadable';
    }
  }
  if (typeof reply !== 'object' || reply === null) return 'unreadable';
  const { ok, error } = reply as { ok?: unknown; error?: { code?: unknown } };
  return ok === true ? 'ok' : String(error?.code ?? 'unreadable');
}

export class Attacker {
  readonly stats = new Map<Kind, KindStats>();
  /** The replies the attacker got on its own result topic, by code (`ok` or the error's). */
  readonly replies: Record<string, number> = {};
  private wire: Wire | undefined;
  private opening: Promise<Wire> | undefined;
  private readonly open = new Set<Wire>();
  private stopped = false;
  private wake: () => void = () => undefined;
  private readonly stopping = new Promise<void>((resolve) => (this.wake = resolve));

  constructor(
    private readonly port: number,
    private readonly ctx: InputContext,
    private readonly stream: ActionStream,
    private readonly intervalMs: number,
  ) {}

  async run(): Promise<void> {
    const inflight = new Set<Promise<void>>();
    while (!this.stopped) {
      const started = Date.now();
      if (inflight.size >= MAX_INFLIGHT) await Promise.race([...inflight, this.stopping]);
      if (this.stopped) break;
      const action = this.stream.next();
      const stats = this.statsOf(action.kind);
      stats.iterations += 1;
      const done = this.act(action, stats).catch(() => {
        stats.cutOff += 1;
      });
      const settled: Promise<void> = Promise.race([done, sleep(ACTION_TIMEOUT_MS)]).then(() => void inflight.delete(settled));
      inflight.add(settled);
      await Promise.race([sleep(Math.max(0, this.intervalMs - (Date.now() - started))), this.stopping]);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    for (const wire of [...this.open, ...(this.wire ? [this.wire] : [])]) wire.destroy();
  }

  private statsOf(kind: Kind): KindStats {
    let stats = this.stats.get(kind);
    if (stats === undefined) this.stats.set(kind, (stats = emptyStats()));
    return stats;
  }

  private act(action: Action, stats: KindStats): Promise<void> {
    switch (action.op) {
      case 'publish':
        return this.publishOwn(action, stats);
      case 'session':
        return this.session(action, stats);
      case 'subscribe':
        return this.subscribe(action, stats);
      case 'raw':
        return this.raw(action);
      case 'identity':
        return this.identity(action, stats);
    }
  }

  /** The attacker's own connection, opened again after the bridge closed it (once, however many actions wait). */
  private own(): Promise<Wire> {
    if (this.wire !== undefined && !this.wire.isClosed) return Promise.resolve(this.wire);
    this.opening ??= this.reconnect().finally(() => (this.opening = undefined));
    return this.opening;
  }

  private async reconnect(): Promise<Wire> {
    const { wire, code } = await Wire.connected(
      this.port,
      { cmd: 'connect', clientId: this.ctx.self, protocolVersion: 5, clean: true, keepalive: 60 },
      ACK_TIMEOUT_MS,
    );
    if (code !== 0) {
      wire.destroy();
      await sleep(500);
      throw new Error(`CONNACK ${code}`);
    }
    wire.onPublish = (packet) => {
      if (packet.topic !== `devices/${this.ctx.self}/result`) return;
      const code = replyCode(packet.payload);
      this.replies[code] = (this.replies[code] ?? 0) + 1;
    };
    wire.write({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: `devices/${this.ctx.self}/result`, qos: 1 }] });
    await wire.await('suback', ACK_TIMEOUT_MS, 1);
    this.wire = wire;
    return wire;
  }

  private async publishOn(wire: Wire, action: PublishAction, stats: KindStats): Promise<void> {
    let last: number | undefined;
    for (let i = 0; i < action.copies; i += 1) {
      const messageId = action.qos > 0 ? wire.messageId() : undefined;
      const packet: IPublishPacket = {
        cmd: 'publish',
        topic: action.topic,
        payload: action.payload,
        qos: action.qos,
        retain: action.retain,
        dup: false,
        ...(messageId ? { messageId } : {}),
        ...(action.properties ? { properties: action.properties } : {}),
      };
      if (!wire.write(packet)) {
        if (!wire.isClosed) stats.unencodable += 1;
        return;
      }
      last = messageId;
    }
    if (last === undefined) return;
    const ack = await wire.await(action.qos === 1 ? 'puback' : 'pubrec', ACK_TIMEOUT_MS, last);
    if (ack === null) {
      if (wire.isClosed) stats.cutOff += 1;
      else stats.noAck += 1;
    } else if (action.qos === 2) {
      wire.write({ cmd: 'pubrel', messageId: last });
      await wire.await('pubcomp', ACK_TIMEOUT_MS, last);
    }
  }

  private async publishOwn(action: PublishAction, stats: KindStats): Promise<void> {
    await this.publishOn(await this.own(), action, stats);
  }

  private async subscribe(action: SubscribeAction, stats: KindStats): Promise<void> {
    const wire = await this.own();
    const messageId = wire.messageId();
    if (!wire.write({ cmd: 'subscribe', messageId, subscriptions: action.subscriptions })) {
      stats.unencodable += 1;
      return;
    }
    if ((await wire.await('suback', ACK_TIMEOUT_MS, messageId)) === null) stats[wire.isClosed ? 'cutOff' : 'noAck'] += 1;
    if (action.unsubscribe) wire.write({ cmd: 'unsubscribe', messageId: wire.messageId(), unsubscriptions: action.subscriptions.map((s) => s.topic) });
  }

  /** A persistent session that subscribes and is never read again. */
  private async session(action: SessionAction, stats: KindStats): Promise<void> {
    const { wire, code } = await Wire.connected(
      this.port,
      {
        cmd: 'connect',
        clientId: `${this.ctx.self}.${action.suffix}`,
        protocolVersion: action.version,
        clean: false,
        keepalive: 60,
        ...(action.version === 5 && action.expiryS !== undefined ? { properties: { sessionExpiryInterval: action.expiryS } } : {}),
      },
      ACK_TIMEOUT_MS,
    );
    this.open.add(wire);
    try {
      if (code !== 0) return void (stats[code === null ? 'noAck' : 'refused'] += 1);
      const messageId = wire.messageId();
      wire.write({ cmd: 'subscribe', messageId, subscriptions: action.filters.map((topic) => ({ topic, qos: 1 as const })) });
      await wire.await('suback', ACK_TIMEOUT_MS, messageId);
      if (action.leave === 'disconnect') return await wire.end();
      if (action.leave === 'stall') wire.stall();
      await Promise.race([wire.closed, sleep(action.holdMs)]);
    } finally {
      wire.destroy();
      this.open.delete(wire);
    }
  }

  private async raw(action: RawAction): Promise<void> {
    const wire = await Wire.open(this.port, 5, ACK_TIMEOUT_MS);
    this.open.add(wire);
    try {
      for (const chunk of action.chunks) wire.socket.write(chunk);
      if (action.stall) wire.stall();
      await Promise.race([wire.closed, sleep(action.holdMs)]);
    } finally {
      wire.destroy();
      this.open.delete(wire);
    }
  }

  /** Anonymous, under the innocent device's id (or one of its `id.*` client ids). */
  private async identity(action: IdentityAction, stats: KindStats): Promise<void> {
    const { wire, code } = await Wire.connected(
      this.port,
      { cmd: 'connect', clientId: action.clientId, protocolVersion: 5, clean: true, keepalive: 60 },
      ACK_TIMEOUT_MS,
    );
    this.open.add(wire);
    try {
      if (code !== 0) return void (stats[code === null ? 'noAck' : 'refused'] += 1);
      if (action.subscribe)
        wire.write({ cmd: 'subscribe', messageId: wire.messageId(), subscriptions: [{ topic: `devices/${this.ctx.innocent}/result`, qos: 1 }] });
      await this.publishOn(wire, action.publish, stats);
      await Promise.race([wire.closed, sleep(action.holdMs)]);
    } finally {
      wire.destroy();
      this.open.delete(wire);
    }
  }
}
