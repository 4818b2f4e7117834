// scada-sim against a real Mosquitto, with a small scripted Edge Node (mqtt.js + the reference
// Sparkplug codec): the STATE it leaves retained, the tag table it builds, the rebirth the
// node receives after a seq gap, and --check's exit codes, in process and as the built CLI.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import mqtt, { type MqttClient } from 'mqtt';
import sparkplug from 'sparkplug-payload';
import type { UMetric } from 'sparkplug-payload/lib/sparkplugbpayload.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REBIRTH_METRIC, sparkplugStateTopic, sparkplugTopic } from '../../contract/scada.js';
import { runScadaSim } from '../../scada-sim/cli.js';
import { startMosquitto, type Mosquitto } from '../helpers/mosquitto.js';
import { eventually } from '../helpers/wait.js';

const codec = sparkplug.get('spBv1.0');
if (codec === null) throw new Error('no spBv1.0 codec');
const CLI = fileURLToPath(new URL('../../dist/scada-sim/cli.js', import.meta.url));

interface Captured {
  write(text: string): boolean;
  text: string;
}
const capture = (): Captured => ({
  text: '',
  write(t: string) {
    this.text += t;
    return true;
  },
});

async function connectClient(url: string, opts: mqtt.IClientOptions = {}): Promise<MqttClient> {
  return mqtt.connectAsync(url, { protocolVersion: 5, reconnectPeriod: 0, ...opts });
}

/** The retained STATE payloads a watcher saw on a host's STATE topic, in order. */
async function watchState(url: string, hostId: string): Promise<{ seen: Array<{ online: boolean; timestamp: number }>; close(): Promise<void> }> {
  const client = await connectClient(url);
  const seen: Array<{ online: boolean; timestamp: number }> = [];
  client.on('message', (_t, payload) => seen.push(JSON.parse(payload.toString()) as { online: boolean; timestamp: number }));
  await client.subscribeAsync(sparkplugStateTopic(hostId), { qos: 1 });
  return { seen, close: () => client.endAsync() };
}

/** A scripted Edge Node: counts seq itself, or sends what a test tells it to. */
async function edgeNode(url: string, group: string, node: string, bdSeq: number) {
  const now = Date.now();
  const death = codec!.encodePayload({ timestamp: now, metrics: [{ name: 'bdSeq', type: 'Int64', value: bdSeq, timestamp: now }] });
  const client = await connectClient(url, {
    will: { topic: sparkplugTopic(group, 'NDEATH', node), payload: Buffer.from(death), qos: 1, retain: false },
  });
  const commands: UMetric[][] = [];
  client.on('message', (_t, payload) => commands.push(codec!.decodePayload(payload).metrics ?? []));
  await client.subscribeAsync(sparkplugTopic(group, 'NCMD', node), { qos: 1 });
  let seq = 0;
  const metric = (m: Omit<UMetric, 'timestamp'>): UMetric => ({ timestamp: Date.now(), ...m }) as UMetric;
  const send = async (type: 'NBIRTH' | 'NDATA' | 'DBIRTH' | 'DDATA' | 'DDEATH', metrics: UMetric[], device?: string, forceSeq?: number): Promise<void> => {
    seq = type === 'NBIRTH' ? 0 : (forceSeq ?? seq + 1) % 256;
    const payload = codec!.encodePayload({ timestamp: Date.now(), seq, metrics });
    await client.publishAsync(sparkplugTopic(group, type, node, device), Buffer.from(payload), { qos: 1 });
  };
  const birth = (): Promise<void> =>
    send('NBIRTH', [metric({ name: 'bdSeq', type: 'Int64', value: bdSeq }), metric({ name: REBIRTH_METRIC, type: 'Boolean', value: false })]);
  const deviceBirth = (device: string): Promise<void> =>
    send(
      'DBIRTH',
      [metric({ name: 'AI/inspect/ok', alias: 1, type: 'Boolean', value: true }), metric({ name: 'AI/inspect/score', alias: 2, type: 'Double', value: 0.5 })],
      device,
    );
  return { client, commands, metric, send, birth, deviceBirth, close: () => client.endAsync() };
}

describe('scada-sim against Mosquitto', () => {
  let broker: Mosquitto;
  beforeAll(async () => {
    broker = await startMosquitto();
  });
  afterAll(async () => {
    await broker?.close();
  });

  it('leaves its STATE retained, builds the tag table from births, data and UNS, and asks for a rebirth on a seq gap', async () => {
    const watcher = await watchState(broker.url, 'host-a');
    const abort = new AbortController();
    const stdout = capture();
    const run = runScadaSim(['--url', broker.url, '--host-id', 'host-a', '--uns', 'acme'], { stdout, stderr: capture(), signal: abort.signal });
    await eventually('STATE online', () => watcher.seen.some((s) => s.online));
    const edge = await edgeNode(broker.url, 'plant', 'bridge', 3);
    await edge.birth();
    await edge.deviceBirth('cam1');
    await edge.send('DDATA', [edge.metric({ alias: 2, type: 'Double', value: 0.875 })], 'cam1');
    const uns = { data: { ok: false, defect: 'scratch' }, quality: 'good', timestamp: Date.now(), requestId: 'r-1' };
    await edge.client.publishAsync('acme/line1/cam1/ai/inspect', JSON.stringify(uns), { qos: 1, retain: true });
    await edge.send('DDATA', [edge.metric({ alias: 1, type: 'Boolean', value: false })], 'cam1', 7);

    await eventually('the rebirth NCMD at the edge node', () => edge.commands.length > 0);
    expect(edge.commands[0]).toEqual([expect.objectContaining({ name: REBIRTH_METRIC, type: 'Boolean', value: true })]);
    abort.abort();
    const { code, report } = await run;
    expect(code).toBe(0);
    expect(report?.rebirths).toEqual(['plant/bridge']);
    expect(report?.first).toMatchObject({ kind: 'seq_gap', topic: 'spBv1.0/plant/DDATA/bridge/cam1' });
    const rows = report?.tags.map((t) => [t.source, t.metric, t.value, t.quality]);
    expect(rows).toEqual([
      ['acme/line1/cam1/ai/inspect', 'defect', 'scratch', 'good'],
      ['acme/line1/cam1/ai/inspect', 'ok', false, 'good'],
      ['plant/bridge', 'Node Control/Rebirth', false, 'good'],
      ['plant/bridge', 'bdSeq', 3, 'good'],
      ['plant/bridge/cam1', 'AI/inspect/ok', false, 'good'],
      ['plant/bridge/cam1', 'AI/inspect/score', 0.875, 'good'],
    ]);
    expect(stdout.text).toContain('rebirth asked: NCMD plant/bridge');

    // Online then offline, both retained with the same timestamp (the Will's), as Sparkplug 3.0 asks.
    await eventually('STATE offline', () => watcher.seen.at(-1)?.online === false);
    const late = await watchState(broker.url, 'host-a');
    await eventually('the retained STATE', () => late.seen.length > 0);
    expect(late.seen[0]?.online).toBe(false);
    expect(new Set(watcher.seen.map((s) => s.timestamp)).size).toBe(1);
    await Promise.all([edge.close(), watcher.close(), late.close()]);
  });

  it('exits 0 under --check after a clean session, and at the end of --duration', async () => {
    const watcher = await watchState(broker.url, 'host-b');
    const abort = new AbortController();
    const stdout = capture();
    const run = runScadaSim(['--url', broker.url, '--host-id', 'host-b', '--group', 'clean', '--check'], { stdout, stderr: capture(), signal: abort.signal });
    await eventually('STATE online', () => watcher.seen.some((s) => s.online));
    const edge = await edgeNode(broker.url, 'clean', 'bridge', 0);
    await edge.birth();
    await edge.deviceBirth('cam1');
    for (let i = 0; i < 5; i += 1) await edge.send('DDATA', [edge.metric({ alias: 2, type: 'Double', value: i })], 'cam1');
    await edge.send('DDEATH', [], 'cam1');
    await eventually('the DDEATH at scada-sim', () => stdout.text.includes('spBv1.0/clean/DDEATH/bridge/cam1'));
    abort.abort();
    const { code, report } = await run;
    expect(code).toBe(0);
    expect(report?.violations).toEqual([]);
    expect(report?.tags.find((t) => t.metric === 'AI/inspect/score')).toMatchObject({ value: 4, quality: 'stale' });

    const timed = await runScadaSim(['--url', broker.url, '--host-id', 'host-c', '--check', '--duration', '0.3', '--json'], {
      stdout: capture(),
      stderr: capture(),
    });
    expect(timed.code).toBe(0);
    await Promise.all([edge.close(), watcher.close()]);
  });

  it('as the built CLI, exits 1 under --check naming a DDATA before DBIRTH', async () => {
    if (!existsSync(CLI)) throw new Error('dist/scada-sim/cli.js is missing: run `npm run build` first');
    const watcher = await watchState(broker.url, 'host-d');
    const child = spawn(process.execPath, [CLI, '--url', broker.url, '--host-id', 'host-d', '--group', 'faulty', '--check', '--duration', '60'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout.resume();
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await eventually('STATE online', () => watcher.seen.some((s) => s.online), 10_000);
      const edge = await edgeNode(broker.url, 'faulty', 'bridge', 1);
      await edge.birth();
      await edge.send('DDATA', [edge.metric({ name: 'AI/inspect/ok', type: 'Boolean', value: true })], 'cam9');
      expect(await exited).toBe(1);
      expect(stderr).toContain("first violation: data_before_birth: DDATA from faulty/bridge/cam9 before that device's DBIRTH");
      await edge.close();
    } finally {
      child.kill('SIGKILL');
      await watcher.close();
    }
  });
});
