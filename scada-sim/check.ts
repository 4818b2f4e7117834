// The Sparkplug B host's view of a session, without MQTT: fed every message the host
// receives, it keeps the tag table and names every break of the session rules (what a
// Sparkplug 3.0 host relies on to trust its tags) and of the UNS payload contract. Tests use
// it as the verifier of what SCADA would see; the host (host.ts) asks for a rebirth when it
// reports a gap.
import { SPARKPLUG_NAMESPACE, UnsPayloadSchema } from '../contract/scada.js';
import { decodeSparkplug, MAX_SHOWN_STRING, withBirthType, type DecodedMetric, type DecodedPayload, type MetricValue } from './decode.js';

export type ViolationKind =
  | 'undecodable'
  | 'data_before_birth'
  | 'seq_gap'
  | 'bdseq_mismatch'
  | 'nbirth_without_bdseq'
  | 'unknown_alias'
  | 'unknown_metric'
  | 'type_changed'
  | 'no_timestamp'
  | 'uns_invalid'
  | 'uns_not_retained';

export interface Violation {
  kind: ViolationKind;
  topic: string;
  message: string;
  atMs: number;
}

export interface Tag {
  /** `group/node`, `group/node/device`, or the UNS topic. */
  source: string;
  metric: string;
  value: MetricValue;
  type: string;
  /** good/bad from the source; `stale` once its node or device died. */
  quality: 'good' | 'bad' | 'stale';
  /** The metric's (or payload's) timestamp, else when it arrived. */
  timestampMs: number;
}

export interface FeedResult {
  violations: Violation[];
  /** Set when the host should ask this node for a rebirth (NCMD Node Control/Rebirth). */
  rebirth?: { group: string; node: string };
}

export interface CheckerOptions {
  /** The UNS root whose `ROOT/...` topics carry UnsPayload JSON. */
  unsRoot?: string;
  maxTags?: number;
  maxViolations?: number;
  maxSources?: number;
}

interface MetricDef {
  name: string;
  type: string;
}

interface Scope {
  born: boolean;
  /** name → definition, and alias → name, from the last birth. */
  metrics: Map<string, MetricDef>;
  aliases: Map<number, string>;
}

interface NodeState extends Scope {
  bdSeq?: number;
  seq: number;
  devices: Map<string, Scope>;
  rebirthAskedMs?: number;
}

/** A node asked for a rebirth is asked again only after this long without one. */
export const REBIRTH_RETRY_MS = 5000;
const DEFAULTS = { maxTags: 10_000, maxViolations: 1000, maxSources: 2000 };
const NODE_TYPES = new Set(['NBIRTH', 'NDEATH', 'NDATA', 'DBIRTH', 'DDEATH', 'DDATA']);

// Code-point order: the same table on every machine, whatever its locale.
const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const newScope = (): Scope => ({ born: false, metrics: new Map(), aliases: new Map() });

export class SessionChecker {
  readonly violations: Violation[] = [];
  /** Every violation seen, including those past the kept list's bound. */
  violationCount = 0;
  droppedTags = 0;
  private readonly nodes = new Map<string, NodeState>();
  private readonly tags = new Map<string, Map<string, Tag>>();
  private tagCount = 0;
  private readonly opts: Required<Omit<CheckerOptions, 'unsRoot'>> & { unsRoot?: string };

  constructor(opts: CheckerOptions = {}) {
    this.opts = { ...DEFAULTS, ...opts };
  }

  first(): Violation | undefined {
    return this.violations[0];
  }

  /** The tag table, sorted by source then metric (code-point order). */
  table(): Tag[] {
    return [...this.tags.values()].flatMap((m) => [...m.values()]).sort((a, b) => compare(a.source, b.source) || compare(a.metric, b.metric));
  }

  /** Nodes seen, with whether they are online (born and not dead). */
  nodeStates(): Array<{ node: string; online: boolean; bdSeq?: number; devices: string[] }> {
    return [...this.nodes.entries()].map(([node, s]) => ({
      node,
      online: s.born,
      ...(s.bdSeq === undefined ? {} : { bdSeq: s.bdSeq }),
      devices: [...s.devices.entries()].filter(([, d]) => d.born).map(([id]) => id),
    }));
  }

  feed(topic: string, payload: Buffer, retained: boolean, nowMs = Date.now()): FeedResult {
    const out: FeedResult = { violations: [] };
    const root = this.opts.unsRoot;
    if (root !== undefined && topic.startsWith(`${root}/`)) this.feedUns(topic, payload, retained, nowMs, out);
    else {
      const levels = topic.split('/');
      const [ns, group, type, node, device] = levels;
      if (ns === SPARKPLUG_NAMESPACE && group !== undefined && type !== undefined && node !== undefined && NODE_TYPES.has(type) && levels.length <= 5) {
        this.feedSparkplug({ topic, group, type, node, device, nowMs, out }, payload);
      }
    }
    return out;
  }

  private report(out: FeedResult, kind: ViolationKind, topic: string, message: string, nowMs: number): void {
    const violation = { kind, topic, message, atMs: nowMs };
    this.violationCount += 1;
    if (this.violations.length < this.opts.maxViolations) this.violations.push(violation);
    out.violations.push(violation);
  }

  private askRebirth(ctx: Ctx, state: NodeState | undefined): void {
    if (state?.rebirthAskedMs !== undefined && ctx.nowMs - state.rebirthAskedMs < REBIRTH_RETRY_MS) return;
    if (state !== undefined) state.rebirthAskedMs = ctx.nowMs;
    ctx.out.rebirth = { group: ctx.group, node: ctx.node };
  }

  private feedSparkplug(ctx: Ctx, bytes: Buffer): void {
    let payload: DecodedPayload;
    try {
      payload = decodeSparkplug(bytes);
    } catch (err) {
      this.report(ctx.out, 'undecodable', ctx.topic, `${ctx.type} is not a Sparkplug B payload (${(err as Error).message})`, ctx.nowMs);
      return;
    }
    const key = `${ctx.group}/${ctx.node}`;
    let state = this.nodes.get(key);
    if (ctx.type === 'NBIRTH') {
      if (state === undefined && this.nodes.size >= this.opts.maxSources) return;
      state ??= { ...newScope(), seq: 0, devices: new Map() };
      this.nodes.set(key, state);
      this.nodeBirth(ctx, state, payload);
      return;
    }
    if (ctx.type === 'NDEATH') {
      this.nodeDeath(ctx, state, payload);
      return;
    }
    if (state === undefined || !state.born) {
      this.report(ctx.out, 'data_before_birth', ctx.topic, `${ctx.type} from ${key} before its NBIRTH`, ctx.nowMs);
      this.askRebirth(ctx, state);
      return;
    }
    this.checkSeq(ctx, state, payload);
    if (ctx.type === 'NDATA') this.data(ctx, state, key, payload);
    else if (ctx.device !== undefined) this.deviceMessage(ctx, state, ctx.device, payload);
  }

  private nodeBirth(ctx: Ctx, state: NodeState, payload: DecodedPayload): void {
    const key = `${ctx.group}/${ctx.node}`;
    if (payload.seq !== 0) this.report(ctx.out, 'seq_gap', ctx.topic, `NBIRTH of ${key} has seq ${payload.seq ?? 'none'}, not 0`, ctx.nowMs);
    const bdSeq = payload.metrics.find((m) => m.name === 'bdSeq');
    if (bdSeq === undefined || typeof bdSeq.value !== 'number') {
      this.report(ctx.out, 'nbirth_without_bdseq', ctx.topic, `NBIRTH of ${key} carries no bdSeq metric`, ctx.nowMs);
      delete state.bdSeq;
    } else state.bdSeq = bdSeq.value;
    state.seq = payload.seq ?? 0;
    delete state.rebirthAskedMs;
    // A new node session: its devices must be born again.
    for (const [id, device] of state.devices) {
      device.born = false;
      this.markStale(`${key}/${id}`);
    }
    this.birth(ctx, state, key, payload);
  }

  private nodeDeath(ctx: Ctx, state: NodeState | undefined, payload: DecodedPayload): void {
    const key = `${ctx.group}/${ctx.node}`;
    const bdSeq = payload.metrics.find((m) => m.name === 'bdSeq')?.value;
    if (state === undefined || state.bdSeq === undefined || !state.born) return;
    if (bdSeq === state.bdSeq) {
      state.born = false;
      this.markStale(key);
      for (const [id, device] of state.devices) {
        device.born = false;
        this.markStale(`${key}/${id}`);
      }
      return;
    }
    // The will of an older connection (the node reconnected before the broker saw the old one
    // drop) carries an earlier bdSeq: hosts ignore it. One ahead of the birth's is a fault.
    const behind = typeof bdSeq === 'number' ? (state.bdSeq - bdSeq + 256) % 256 : 0;
    if (behind >= 1 && behind < 128) return;
    this.report(ctx.out, 'bdseq_mismatch', ctx.topic, `NDEATH of ${key} has bdSeq ${bdSeq ?? 'none'}, its NBIRTH had ${state.bdSeq}`, ctx.nowMs);
  }

  private checkSeq(ctx: Ctx, state: NodeState, payload: DecodedPayload): void {
    const expected = (state.seq + 1) % 256;
    if (payload.seq !== expected) {
      this.report(ctx.out, 'seq_gap', ctx.topic, `${ctx.type} of ${ctx.group}/${ctx.node} has seq ${payload.seq ?? 'none'}, expected ${expected}`, ctx.nowMs);
      this.askRebirth(ctx, state);
    }
    // Follow the node's count from here, so one gap is reported once.
    if (payload.seq !== undefined) state.seq = payload.seq % 256;
  }

  private deviceMessage(ctx: Ctx, state: NodeState, id: string, payload: DecodedPayload): void {
    const source = `${ctx.group}/${ctx.node}/${id}`;
    let device = state.devices.get(id);
    if (ctx.type === 'DBIRTH') {
      if (device === undefined && state.devices.size >= this.opts.maxSources) return;
      device ??= newScope();
      state.devices.set(id, device);
      this.birth(ctx, device, source, payload);
    } else if (ctx.type === 'DDEATH') {
      if (device !== undefined) device.born = false;
      this.markStale(source);
    } else if (device === undefined || !device.born) {
      this.report(ctx.out, 'data_before_birth', ctx.topic, `DDATA from ${source} before that device's DBIRTH`, ctx.nowMs);
      this.askRebirth(ctx, state);
    } else this.data(ctx, device, source, payload);
  }

  /** NBIRTH/DBIRTH: the metric definitions (names, aliases, types) and their first values. */
  private birth(ctx: Ctx, scope: Scope, source: string, payload: DecodedPayload): void {
    scope.born = true;
    scope.metrics.clear();
    scope.aliases.clear();
    this.dropTags(source);
    for (const metric of payload.metrics.slice(0, this.opts.maxTags)) {
      if (metric.name === undefined) continue;
      const type = metric.type ?? 'Unknown';
      scope.metrics.set(metric.name, { name: metric.name, type });
      if (metric.alias !== undefined) scope.aliases.set(metric.alias, metric.name);
      this.checkTimestamp(ctx, source, metric.name, metric);
      this.setTag(source, metric.name, metric.value, type, metric.timestamp ?? payload.timestamp ?? ctx.nowMs);
    }
  }

  /** NDATA/DDATA: every metric known from the birth, by name or alias, with the birth's type. */
  private data(ctx: Ctx, scope: Scope, source: string, payload: DecodedPayload): void {
    for (const metric of payload.metrics) {
      const name = metric.name ?? (metric.alias === undefined ? undefined : scope.aliases.get(metric.alias));
      if (name === undefined) {
        this.report(ctx.out, 'unknown_alias', ctx.topic, `${ctx.type} of ${source}: alias ${metric.alias ?? 'none'} was not declared in its birth`, ctx.nowMs);
        this.askRebirth(ctx, this.nodes.get(`${ctx.group}/${ctx.node}`));
        continue;
      }
      const def = scope.metrics.get(name);
      if (def === undefined) {
        this.report(
          ctx.out,
          'unknown_metric',
          ctx.topic,
          `${ctx.type} of ${source}: metric "${name.slice(0, MAX_SHOWN_STRING)}" was not in its birth`,
          ctx.nowMs,
        );
        this.askRebirth(ctx, this.nodes.get(`${ctx.group}/${ctx.node}`));
        continue;
      }
      if (metric.type !== undefined && metric.type !== def.type) {
        this.report(ctx.out, 'type_changed', ctx.topic, `${ctx.type} of ${source}: "${name}" is ${metric.type}, its birth said ${def.type}`, ctx.nowMs);
      }
      this.checkTimestamp(ctx, source, name, metric);
      const value = metric.type === undefined ? withBirthType(metric.value, def.type) : metric.value;
      this.setTag(source, name, value, def.type, metric.timestamp ?? payload.timestamp ?? ctx.nowMs);
    }
  }

  private checkTimestamp(ctx: Ctx, source: string, name: string, metric: DecodedMetric): void {
    if (metric.timestamp === undefined) {
      this.report(ctx.out, 'no_timestamp', ctx.topic, `${ctx.type} of ${source}: metric "${name.slice(0, MAX_SHOWN_STRING)}" has no timestamp`, ctx.nowMs);
    }
  }

  private feedUns(topic: string, payload: Buffer, retained: boolean, nowMs: number, out: FeedResult): void {
    // An empty retained message clears the topic: the tag is gone, not broken.
    if (payload.length === 0) {
      this.dropTags(topic);
      return;
    }
    if (!retained) this.report(out, 'uns_not_retained', topic, `UNS message on ${topic} is not retained`, nowMs);
    let json: unknown;
    try {
      json = JSON.parse(payload.toString('utf8'));
    } catch {
      this.report(out, 'uns_invalid', topic, `UNS payload on ${topic} is not JSON`, nowMs);
      return;
    }
    const parsed = UnsPayloadSchema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      this.report(out, 'uns_invalid', topic, `UNS payload on ${topic}: ${issue?.path.join('.') ?? ''} ${issue?.message ?? 'invalid'}`.trim(), nowMs);
      return;
    }
    const uns = parsed.data;
    this.dropTags(topic);
    const fields = Object.entries(uns.data ?? {});
    if (fields.length === 0) this.setTag(topic, 'error', uns.error ?? null, 'String', uns.timestamp, uns.quality);
    for (const [field, value] of fields) {
      const shown = typeof value === 'string' ? value.slice(0, MAX_SHOWN_STRING) : value;
      this.setTag(topic, field, shown, typeof value, uns.timestamp, uns.quality);
    }
  }

  private setTag(source: string, metric: string, value: MetricValue, type: string, timestampMs: number, quality: Tag['quality'] = 'good'): void {
    let tags = this.tags.get(source);
    const known = tags?.has(metric) ?? false;
    if (!known && this.tagCount >= this.opts.maxTags) {
      this.droppedTags += 1;
      return;
    }
    if (tags === undefined) {
      tags = new Map();
      this.tags.set(source, tags);
    }
    if (!known) this.tagCount += 1;
    tags.set(metric, { source, metric: metric.slice(0, MAX_SHOWN_STRING), value, type, quality, timestampMs });
  }

  private dropTags(source: string): void {
    const tags = this.tags.get(source);
    if (tags === undefined) return;
    this.tagCount -= tags.size;
    this.tags.delete(source);
  }

  private markStale(source: string): void {
    for (const tag of this.tags.get(source)?.values() ?? []) tag.quality = 'stale';
  }
}

interface Ctx {
  topic: string;
  group: string;
  type: string;
  node: string;
  device: string | undefined;
  nowMs: number;
  out: FeedResult;
}
