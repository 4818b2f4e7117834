// The Sparkplug B Edge Node's session as a host application sees it, over a real Mosquitto
// (the plant's broker: a dedicated connection with the NDEATH Will) and over the embedded
// broker: births, data by alias, seq, bdSeq, rebirth, the primary host, DDEATH and the lease,
// each session also judged by scada-sim's checker (no violation).
// Answers are announced through a MemoryScadaState, as the SCADA outputs announce them.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sparkplugStateTopic, type ScadaAnswer, type TypedData } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { embeddedNodeLink, externalNodeLink } from '../../bridge/mqtt/sparkplug-link.js';
import { EdgeNode, type EdgeNodeOptions } from '../../bridge/scada/sparkplug/edge-node.js';
import type { SparkplugLink } from '../../bridge/scada/sparkplug/link.js';
import type { OutputField } from '../../bridge/config/output.js';
import { MemoryScadaState } from '../../bridge/store/memory-scada-state.js';
import { BROKER_MODES, sleep, startHarness, type BrokerMode } from '../helpers/harness.js';
import { startMosquitto } from '../helpers/mosquitto.js';
import { tempDir, writeAuthFile } from '../helpers/security.js';
import { eventually } from '../helpers/wait.js';
import { metricValue, observe, type Observer, type Seen } from '../helpers/sparkplug-observer.js';

const GROUP = 'plant';
const NODE = 'ai-bridge';
const log = createLogger('silent');
const FIELDS: Record<string, OutputField[]> = {
  inspect: [
    { name: 'ok', type: 'boolean' },
    { name: 'score', type: 'number' },
    { name: 'count', type: 'integer' },
    { name: 'label', type: 'string' },
  ],
  count: [{ name: 'n', type: 'integer' }],
};
const BOUNDS = { maxEntries: 1000, maxRecordBytes: 16_384, ttlS: 3600 };
/** The Edge Nodes' lease lifetime in these tests (renewed every third of it). */
const LEASE_TTL_MS = 600;

interface Rig {
  url: string;
  link(): EdgeNodeOptions['link'];
  observe(): Promise<Observer>;
  close(): Promise<void>;
}

const uid = (): string => randomBytes(3).toString('hex');

async function rig(mode: BrokerMode): Promise<Rig> {
  if (mode === 'external') {
    const m = await startMosquitto();
    const options = { brokerUrl: m.url, brokerShareGroup: 'g', brokerSessionExpiryS: 0 };
    return { url: m.url, link: () => externalNodeLink(options, `node-${uid()}`, log), observe: () => observe(m.url, GROUP), close: () => m.close() };
  }
  const dir = tempDir('eab-spb-');
  const authFile = join(dir.path, 'auth.json');
  await writeAuthFile(authFile, [{ username: 'host', password: 'host-pw', role: 'operator' }]);
  const h = await startHarness({ AUTH_FILE: authFile });
  return {
    url: h.url,
    link: () => embeddedNodeLink(h.bridge.broker!),
    observe: () => observe(h.url, GROUP, { username: 'host', password: 'host-pw' }),
    async close() {
      await h.close();
      dir.remove();
    },
  };
}

const answer = (deviceId: string, requestId: string, data?: TypedData, quality: 'good' | 'bad' = 'good', template = 'inspect'): ScadaAnswer => ({
  deviceId,
  template,
  requestId,
  quality,
  timestamp: Date.now(),
  latencyMs: 12,
  ...(data ? { data } : {}),
  ...(quality === 'bad' ? { error: 'upstream_error' as const } : {}),
});

const names = (s: Seen): string[] => s.metrics.map((m) => m.name ?? '').sort();

/** A node's link that counts the messages on `topic` it has handed the node, in all its sessions. */
function counting(link: SparkplugLink, topic: string): { link: SparkplugLink; count: () => number } {
  let count = 0;
  const open: SparkplugLink['open'] = (will, filters, handlers) =>
    link.open(will, filters, {
      ...handlers,
      message: (t, payload) => {
        if (t === topic) count += 1;
        handlers.message(t, payload);
      },
    });
  return { link: { willOutlivesProcess: link.willOutlivesProcess, open }, count: () => count };
}

describe.each(BROKER_MODES)('Sparkplug Edge Node (%s broker)', (mode) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });

  async function setup(): Promise<{ r: Rig; host: Observer; state: MemoryScadaState }> {
    const r = await rig(mode);
    cleanups.push(() => r.close());
    const host = await r.observe();
    cleanups.push(() => host.close());
    return { r, host, state: new MemoryScadaState(BOUNDS) };
  }

  function startNode(r: Rig, state: MemoryScadaState, extra: Partial<EdgeNodeOptions> = {}): Promise<EdgeNode> {
    const node = new EdgeNode({
      settings: { groupId: GROUP, edgeNodeId: NODE, primaryHostId: undefined, deviceIdleMs: 600_000 },
      state,
      link: r.link(),
      owner: `owner-${uid()}`,
      fieldsOf: (t) => FIELDS[t],
      log,
      idleDeaths: false,
      leaseTtlMs: LEASE_TTL_MS,
      retryMs: 100,
      ...extra,
    });
    cleanups.push(() => node.stop());
    return node.start().then(() => node);
  }

  it('births with bdSeq and the rebirth control, DBIRTH with aliases and types, DDATA by alias, a failure, a new template, rebirth on NCMD', async () => {
    const { r, host, state } = await setup();
    const node = await startNode(r, state);
    const [nb] = await host.wait('NBIRTH');
    expect(nb!.seq).toBe(0);
    expect(nb!.qos).toBe(0);
    expect(nb!.retain).toBe(false);
    expect(nb!.metrics).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'bdSeq', type: 'Int64', value: 0 }),
        expect.objectContaining({ name: 'Node Control/Rebirth', type: 'Boolean', value: false }),
      ]),
    );

    await state.announce({ kind: 'answer', answer: answer('cam-1', 'r1', { ok: true, score: 0.5, count: 3, label: 'dent' }) });
    const [db] = await host.wait('DBIRTH', 1, 'cam-1');
    expect(db!.seq).toBe(1);
    expect(names(db!)).toEqual([
      'AI/inspect/count',
      'AI/inspect/label',
      'AI/inspect/latencyMs',
      'AI/inspect/ok',
      'AI/inspect/quality',
      'AI/inspect/requestId',
      'AI/inspect/score',
    ]);
    const byName = new Map(db!.metrics.map((m) => [m.name, m]));
    expect(byName.get('AI/inspect/ok')).toMatchObject({ type: 'Boolean', value: true });
    expect(byName.get('AI/inspect/score')).toMatchObject({ type: 'Double', value: 0.5 });
    expect(byName.get('AI/inspect/count')).toMatchObject({ type: 'Int64', value: 3 });
    expect(byName.get('AI/inspect/label')).toMatchObject({ type: 'String', value: 'dent' });
    expect(byName.get('AI/inspect/quality')).toMatchObject({ type: 'String', value: 'good' });
    expect(byName.get('AI/inspect/requestId')).toMatchObject({ type: 'String', value: 'r1' });
    expect(byName.get('AI/inspect/latencyMs')).toMatchObject({ type: 'Int64', value: 12 });
    for (const m of db!.metrics) expect(m.timestamp).toBeGreaterThan(0);
    const aliases = db!.metrics.map((m) => m.alias);
    expect(new Set(aliases).size).toBe(aliases.length);

    await state.announce({ kind: 'answer', answer: answer('cam-1', 'r2', { ok: false, score: 0.9, count: 3, label: 'dent' }) });
    const [dd] = await host.wait('DDATA', 1, 'cam-1');
    expect(dd!.seq).toBe(2);
    for (const m of dd!.metrics) expect(m.name).toBeUndefined();
    const aliasOf = (name: string): number | undefined => byName.get(name)?.alias;
    expect(dd!.metrics).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ alias: aliasOf('AI/inspect/ok'), value: false }),
        expect.objectContaining({ alias: aliasOf('AI/inspect/score'), value: 0.9 }),
        expect.objectContaining({ alias: aliasOf('AI/inspect/requestId'), value: 'r2' }),
      ]),
    );

    // A failure: quality bad, the fields keep their last good values (not sent again).
    await state.announce({ kind: 'answer', answer: answer('cam-1', 'r3', undefined, 'bad') });
    const bad = (await host.wait('DDATA', 2, 'cam-1'))[1]!;
    expect(bad.seq).toBe(3);
    expect(bad.metrics.map((m) => m.alias).sort()).toEqual([aliasOf('AI/inspect/quality'), aliasOf('AI/inspect/requestId')].sort());
    expect(bad.metrics.find((m) => m.alias === aliasOf('AI/inspect/quality'))?.value).toBe('bad');

    // A new template for the device: a new DBIRTH with all its metrics.
    await state.announce({ kind: 'answer', answer: answer('cam-1', 'r4', { n: 7 }, 'good', 'count') });
    const again = (await host.wait('DBIRTH', 2, 'cam-1'))[1]!;
    expect(again.seq).toBe(4);
    expect(names(again)).toHaveLength(7 + 4);
    expect(metricValue(again, 'AI/inspect/quality')).toBe('bad');
    expect(metricValue(again, 'AI/inspect/score')).toBe(0.9);
    expect(metricValue(again, 'AI/count/n')).toBe(7);

    // NCMD rebirth: NBIRTH (seq 0, same bdSeq), then every DBIRTH with current values.
    await host.rebirth(GROUP, NODE);
    const reborn = (await host.wait('NBIRTH', 2))[1]!;
    expect(reborn.seq).toBe(0);
    expect(metricValue(reborn, 'bdSeq')).toBe(0);
    const third = (await host.wait('DBIRTH', 3, 'cam-1'))[2]!;
    expect(third.seq).toBe(1);
    expect(metricValue(third, 'AI/count/n')).toBe(7);
    expect(node.bdSeq).toBe(0);
    expect(host.violations()).toEqual([]);
  });

  it('counts seq 0–255 and wraps, across DBIRTH and DDATA of several devices', { timeout: 30_000 }, async () => {
    const { r, host, state } = await setup();
    await startNode(r, state);
    await host.wait('NBIRTH');
    const total = 300;
    for (let i = 0; i < total; i += 1) {
      await state.announce({ kind: 'answer', answer: answer(`cam-${i % 3}`, `r${i}`, { ok: i % 2 === 0, score: i, count: i, label: 'x' }) });
    }
    await eventually('every message', () => host.seen.filter((s) => s.type === 'DDATA' || s.type === 'DBIRTH').length >= total, 15_000);
    const seqs = host.seen.filter((s) => s.type !== 'NBIRTH').map((s) => s.seq);
    expect(seqs).toEqual(Array.from({ length: total }, (_, i) => (i + 1) % 256));
    expect(host.violations()).toEqual([]);
  });

  it('a host that joins mid-session is told data_before_birth until it asks a rebirth; after it, the session is sound', async () => {
    const { r, host, state } = await setup();
    await startNode(r, state);
    await host.wait('NBIRTH');
    const late = await r.observe();
    cleanups.push(() => late.close());
    await state.announce({ kind: 'answer', answer: answer('cam-2', 'r1', { ok: true, score: 1, count: 1, label: 'a' }) });
    await late.wait('DBIRTH', 1, 'cam-2');
    expect(late.violations()).toEqual([expect.objectContaining({ kind: 'data_before_birth', topic: `spBv1.0/${GROUP}/DBIRTH/${NODE}/cam-2` })]);
    await late.rebirth(GROUP, NODE);
    await late.wait('DBIRTH', 2, 'cam-2');
    await state.announce({ kind: 'answer', answer: answer('cam-2', 'r2', { ok: false, score: 2, count: 1, label: 'a' }) });
    await late.wait('DDATA', 1, 'cam-2');
    expect(late.violations()).toHaveLength(1);
    expect(late.checker.table().find((t) => t.metric === 'AI/inspect/score')).toMatchObject({ source: `${GROUP}/${NODE}/cam-2`, value: 2, quality: 'good' });
    expect(host.violations()).toEqual([]);
  });

  it('publishes the NDEATH with its bdSeq on a clean stop; the next session is bdSeq + 1', async () => {
    const { r, host, state } = await setup();
    const first = await startNode(r, state);
    await host.wait('NBIRTH');
    await first.stop();
    const [death] = await host.wait('NDEATH');
    expect(metricValue(death!, 'bdSeq')).toBe(0);
    expect(death!.seq).toBeUndefined();
    await startNode(r, state);
    const second = (await host.wait('NBIRTH', 2))[1]!;
    expect(metricValue(second, 'bdSeq')).toBe(1);
    expect(host.violations()).toEqual([]);
  });

  it('a fleet is one node: the lease holder alone publishes; after its death the other ends its session (NDEATH, its bdSeq) and births with the next bdSeq and current values', async () => {
    const { r, host, state } = await setup();
    const a = await startNode(r, state);
    const b = await startNode(r, state);
    await host.wait('NBIRTH');
    await state.keepGood(answer('cam-1', 'r1', { ok: true, score: 1, count: 1, label: 'a' }));
    await state.announce({ kind: 'answer', answer: answer('cam-1', 'r1', { ok: true, score: 1, count: 1, label: 'a' }) });
    await host.wait('DBIRTH', 1, 'cam-1');
    await sleep(LEASE_TTL_MS + 100); // longer than a lease, renewed meanwhile: still one publisher
    expect(host.of('NBIRTH')).toHaveLength(1);
    expect(a.publishing).toBe(true);
    expect(b.publishing).toBe(false);

    await a.abandon();
    const [death] = await host.wait('NDEATH', 1, undefined, 10_000);
    expect(metricValue(death!, 'bdSeq')).toBe(0); // the Will, or the successor on the embedded broker
    const birth = (await host.wait('NBIRTH', 2, undefined, 10_000))[1]!;
    expect(metricValue(birth, 'bdSeq')).toBe(1);
    expect(host.seen.indexOf(death!)).toBeLessThan(host.seen.indexOf(birth));
    const db = (await host.wait('DBIRTH', 2, 'cam-1'))[1]!;
    expect(metricValue(db, 'AI/inspect/label')).toBe('a');
    expect(b.publishing).toBe(true);
    expect(host.violations()).toEqual([]);
  });

  it('waits for the primary host to be online, ends the session when it goes offline and births again (next bdSeq) when it is back; older STATE is ignored', async () => {
    const { r, host, state } = await setup();
    const t0 = Date.now();
    await host.state('scada-1', false, t0);
    const states = counting(r.link(), sparkplugStateTopic('scada-1'));
    const settings = { groupId: GROUP, edgeNodeId: NODE, primaryHostId: 'scada-1', deviceIdleMs: 600_000 };
    const node = await startNode(r, state, { settings, link: states.link });
    /** The node has read the `n`th STATE (retained copies included) and done all it does about it. */
    const handled = async (n: number): Promise<void> => {
      await eventually(`STATE ${n} read by the node`, () => states.count() >= n);
      await node.idle();
    };
    await handled(1); // the retained offline
    expect(node.publishing).toBe(false);
    expect(host.of('NBIRTH')).toEqual([]);
    await host.state('scada-1', true, t0 + 1);
    const [first] = await host.wait('NBIRTH');
    expect(metricValue(first!, 'bdSeq')).toBe(0);
    await host.state('scada-1', false, t0 - 1000); // older than the last one: ignored
    await handled(3);
    expect(node.publishing).toBe(true);
    expect(host.of('NDEATH')).toEqual([]);
    await host.state('scada-1', false, t0 + 2);
    const [death] = await host.wait('NDEATH');
    expect(metricValue(death!, 'bdSeq')).toBe(0);
    await handled(5); // the new session's retained copy of that offline
    expect(node.publishing).toBe(false);
    expect(host.of('NBIRTH')).toHaveLength(1);
    await host.state('scada-1', true, t0 + 3);
    const second = (await host.wait('NBIRTH', 2))[1]!;
    expect(metricValue(second, 'bdSeq')).toBe(1);
    expect(host.violations()).toEqual([]);
  });

  it('publishes DDEATH for a device gone, and a DBIRTH when it answers again', async () => {
    const { r, host, state } = await setup();
    await startNode(r, state, { idleDeaths: mode === 'external', settings: { groupId: GROUP, edgeNodeId: NODE, primaryHostId: undefined, deviceIdleMs: 400 } });
    await host.wait('NBIRTH');
    await state.announce({ kind: 'answer', answer: answer('cam-9', 'r1', { ok: true, score: 1, count: 1, label: 'a' }) });
    await host.wait('DBIRTH', 1, 'cam-9');
    // Plant's broker: idle for SPARKPLUG_DEVICE_IDLE_S; embedded broker: its connection closed.
    if (mode === 'embedded') await state.announce({ kind: 'gone', deviceId: 'cam-9', atMs: Date.now() });
    const [death] = await host.wait('DDEATH', 1, 'cam-9', 10_000);
    expect(death!.seq).toBe(2);
    await host.rebirth(GROUP, NODE);
    await host.wait('NBIRTH', 2);
    await state.announce({ kind: 'answer', answer: answer('cam-9', 'r2', { ok: true, score: 2, count: 1, label: 'a' }) });
    const again = (await host.wait('DBIRTH', 2, 'cam-9'))[1]!;
    expect(metricValue(again, 'AI/inspect/score')).toBe(2);
    // A dead device is not born again by a rebirth: its DBIRTHs are the first and r2's, which the
    // node published after all of the rebirth (a barrier).
    expect(host.of('DBIRTH', 'cam-9').map((s) => metricValue(s, 'AI/inspect/requestId'))).toEqual(['r1', 'r2']);
    expect(host.violations()).toEqual([]);
  });
});
