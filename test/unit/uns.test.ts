// The plant's namespace without a broker: the `uns` config's checks and device map, a reply
// turned into a tag's answer, and what the SCADA outputs publish (payload, order, last good
// data on a failure, retained topics bounded), read from a recording publish.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { maySubscribe, mayPublish, type Identity } from '../../broker/acl.js';
import type { PublishOptions, Reply, ScadaAnswer } from '../../contract/index.js';
import { UnsPayloadSchema } from '../../contract/index.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfigFile } from '../../bridge/config/config-file.js';
import { placeOf, UnsSchema } from '../../bridge/config/uns.js';
import { scadaAnswerOf } from '../../bridge/scada/answers.js';
import { ScadaOutputs } from '../../bridge/scada/outputs.js';
import { UnsPublisher } from '../../bridge/scada/uns.js';
import { MemoryScadaState } from '../../bridge/store/memory-scada-state.js';
import type { ScadaEvent, ScadaState } from '../../bridge/store/scada-state.js';

const silent = pino({ level: 'silent' });
const BOUNDS = { maxEntries: 100, maxRecordBytes: 10_000, ttlS: 3600 };

function ok(id: string, data: Record<string, unknown> | undefined): Reply {
  return {
    id,
    ok: true,
    model: 'gpt-4o-mini',
    content: JSON.stringify(data ?? {}),
    finish_reason: 'stop',
    cached: false,
    attempts: 1,
    priority: 'normal',
    timing: { queued_ms: 3, upstream_ms: 400, total_ms: 412.6 },
    ...(data ? { data } : {}),
  };
}
const failed = (id: string | null): Reply => ({ id, ok: false, error: { code: 'upstream_error', message: 'upstream said 500' } });

interface Sent {
  topic: string;
  payload: string;
  options: PublishOptions;
}

function recorder(): { sent: Sent[]; publish: (topic: string, payload: Buffer, options: PublishOptions) => Promise<void> } {
  const sent: Sent[] = [];
  return { sent, publish: async (topic, payload, options) => void sent.push({ topic, payload: payload.toString(), options }) };
}

describe('CONFIG_FILE uns', () => {
  const problems = (uns: unknown): string[] => {
    const parsed = UnsSchema.safeParse(uns);
    return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  };

  it('takes a root and places made of tag-safe levels', () => {
    expect(problems({ root: 'acme/plant-1', devices: { 'press-*': 'stamping/line-3', 'cam-7': 'paint/line-1/cell-2' } })).toEqual([]);
    expect(UnsSchema.parse({ root: 'acme' }).devices).toEqual({});
  });

  it.each([
    ['acme/+/x', 'wildcards'],
    ['acme/#', 'wildcards'],
    ['$SYS/acme', '$'],
    ['/acme', 'empty level'],
    ['acme/', 'empty level'],
    ['acme//plant', 'empty level'],
    ['', 'empty'],
    ['acme/plant 1', 'level "plant 1"'],
    ['acme/pl.ant', 'level "pl.ant"'],
    ['devices/plant', "the bridge's own topics"],
    ['bridge', "the bridge's own topics"],
  ])('refuses the root %j (%s)', (root, why) => {
    const found = problems({ root });
    expect(found).toHaveLength(1);
    expect(found[0]).toContain(why);
  });

  it('refuses a bad place or device pattern, naming it', () => {
    expect(problems({ root: 'acme', devices: { 'cam-1': 'paint/#' } })).toEqual(['devices.cam-1: must not hold MQTT wildcards (+ or #)']);
    expect(problems({ root: 'acme', devices: { 'cam 1': 'paint' } })[0]).toMatch(/^devices\.cam 1: a device id, or a pattern/);
    expect(problems({ root: 'acme', extra: 1 })).toHaveLength(1);
  });

  it('stops the start with a line naming CONFIG_FILE, the path in the file and the problem', () => {
    const dir = mkdtempSync(join(tmpdir(), 'eab-uns-config-'));
    try {
      const path = join(dir, 'config.json');
      writeFileSync(path, JSON.stringify({ uns: { root: 'acme/plant 1', devices: { 'press-*': 'line/+' } } }));
      expect(parseConfigFile(path).problems).toEqual([
        { variable: 'CONFIG_FILE', problem: `${path}:1:16: uns.root: level "plant 1" has characters outside A-Za-z0-9_- (levels are separated by /)` },
        { variable: 'CONFIG_FILE', problem: `${path}:1:52: uns.devices.press-*: must not hold MQTT wildcards (+ or #)` },
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('places a device by its own entry, else the longest matching pattern, else unassigned', () => {
    const devices = { 'press-*': 'stamping', 'press-1*': 'stamping/line-1', 'press-7': 'stamping/line-7', '*-cam': 'paint' };
    expect(placeOf(devices, 'press-7')).toBe('stamping/line-7');
    expect(placeOf(devices, 'press-12')).toBe('stamping/line-1');
    expect(placeOf(devices, 'press-2')).toBe('stamping');
    expect(placeOf(devices, 'x-cam')).toBe('paint');
    expect(placeOf(devices, 'robot-1')).toBe('unassigned');
  });
});

describe('a template reply as a SCADA answer', () => {
  const at = 1_700_000_000_123;

  it('makes an ok reply with data a good answer, and an error reply a bad one', () => {
    const good = scadaAnswerOf({ deviceId: 'press-1', template: 'inspect', reply: ok('r1', { reject: true, burr_mm: 0.31 }), atMs: at }, true);
    expect(good).toEqual({
      deviceId: 'press-1',
      template: 'inspect',
      quality: 'good',
      data: { reject: true, burr_mm: 0.31 },
      timestamp: at,
      requestId: 'r1',
      model: 'gpt-4o-mini',
      latencyMs: 413,
    });
    const bad = scadaAnswerOf({ deviceId: 'press-1', template: 'inspect', reply: failed('r2'), atMs: at }, true);
    expect(bad).toEqual({ deviceId: 'press-1', template: 'inspect', quality: 'bad', timestamp: at, requestId: 'r2', error: 'upstream_error' });
  });

  it('publishes nothing for a template without output, or an ok reply without data', () => {
    expect(scadaAnswerOf({ deviceId: 'd', template: 't', reply: ok('r', { a: 1 }), atMs: at }, false)).toBeUndefined();
    expect(scadaAnswerOf({ deviceId: 'd', template: 't', reply: failed('r'), atMs: at }, false)).toBeUndefined();
    expect(scadaAnswerOf({ deviceId: 'd', template: 't', reply: ok('r', undefined), atMs: at }, true)).toBeUndefined();
  });

  it('keeps only tag values under safe names (a __proto__ field stays a field)', () => {
    const data = JSON.parse('{"__proto__":"x","ok":true,"n":null,"o":{},"bad name":1,"inf":1}') as Record<string, unknown>;
    data.inf = Infinity;
    const answer = scadaAnswerOf({ deviceId: 'd', template: 't', reply: ok('r', data), atMs: at }, true);
    expect(answer?.data).toEqual(
      Object.fromEntries([
        ['__proto__', 'x'],
        ['ok', true],
      ]),
    );
    expect(Object.getPrototypeOf(answer?.data)).toBe(Object.prototype);
  });
});

describe('SCADA outputs', () => {
  const uns = { root: 'acme/plant-1', devices: { 'press-*': 'stamping/line-3' } };

  function outputs(state: ScadaState = new MemoryScadaState(BOUNDS), options: { sparkplug?: boolean; maxTopics?: number } = {}) {
    const { sent, publish } = recorder();
    const sink = new ScadaOutputs({
      state,
      uns: new UnsPublisher({ config: uns, publish, maxTopics: options.maxTopics ?? 100 }),
      sparkplug: options.sparkplug ?? false,
      hasOutput: (template) => template !== 'prose',
      logger: silent,
    });
    return { sink, sent, state };
  }

  it('publishes a good answer retained at QoS 1 on its tag, and a failure with the last good data marked bad', async () => {
    const { sink, sent } = outputs();
    sink.answered({ deviceId: 'press-1', template: 'inspect', reply: ok('r1', { reject: true, burr_mm: 0.31 }), atMs: 1000 });
    await sink.idle();
    sink.answered({ deviceId: 'press-1', template: 'inspect', reply: failed('r2'), atMs: 2000 });
    sink.answered({ deviceId: 'press-1', template: 'prose', reply: ok('r3', { a: 1 }), atMs: 2000 });
    await sink.idle();
    expect(sent.map((s) => [s.topic, s.options])).toEqual([
      ['acme/plant-1/stamping/line-3/press-1/ai/inspect', { qos: 1, retain: true }],
      ['acme/plant-1/stamping/line-3/press-1/ai/inspect', { qos: 1, retain: true }],
    ]);
    const payloads = sent.map((s) => UnsPayloadSchema.strict().parse(JSON.parse(s.payload)));
    expect(payloads[0]).toEqual({
      data: { reject: true, burr_mm: 0.31 },
      quality: 'good',
      timestamp: 1000,
      requestId: 'r1',
      model: 'gpt-4o-mini',
      latencyMs: 413,
    });
    expect(payloads[1]).toEqual({ data: { reject: true, burr_mm: 0.31 }, quality: 'bad', timestamp: 2000, requestId: 'r2', error: 'upstream_error' });
  });

  it('publishes a failure without data when there never was a good answer, under unassigned for an unmapped device', async () => {
    const { sink, sent } = outputs();
    sink.answered({ deviceId: 'robot.1', template: 'in spect', reply: failed(null), atMs: 5 });
    await sink.idle();
    expect(sent).toHaveLength(1);
    expect(sent[0]?.topic).toBe('acme/plant-1/unassigned/robot_1/ai/in_spect');
    expect(JSON.parse(sent[0]?.payload ?? '')).toEqual({ quality: 'bad', timestamp: 5, requestId: '', error: 'upstream_error' });
  });

  it("keeps a tag's answers in order though the store answers out of order, and keeps the newest good one", async () => {
    const memory = new MemoryScadaState(BOUNDS);
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let slowFirst = true;
    // The first keep waits: the answers behind it must not overtake it.
    const state: ScadaState = Object.assign(Object.create(memory) as ScadaState, {
      keepGood: async (a: ScadaAnswer) => {
        if (slowFirst) {
          slowFirst = false;
          await gate;
        }
        return memory.keepGood(a);
      },
    });
    const { sink, sent } = outputs(state);
    sink.answered({ deviceId: 'press-1', template: 'inspect', reply: ok('r1', { n: 1 }), atMs: 1 });
    sink.answered({ deviceId: 'press-2', template: 'inspect', reply: ok('q1', { n: 9 }), atMs: 1 });
    await Promise.resolve();
    await Promise.resolve();
    sink.answered({ deviceId: 'press-1', template: 'inspect', reply: ok('r2', { n: 2 }), atMs: 2 });
    sink.answered({ deviceId: 'press-1', template: 'inspect', reply: failed('r3'), atMs: 3 });
    release();
    await sink.idle();
    const press1 = sent.filter((s) => s.topic.includes('press-1')).map((s) => JSON.parse(s.payload) as { requestId: string; data: unknown; quality: string });
    // r2 waited behind r1 and was replaced by r3: r3 carries r2's data, which was kept.
    expect(press1.map((p) => [p.requestId, p.quality, p.data])).toEqual([
      ['r1', 'good', { n: 1 }],
      ['r3', 'bad', { n: 2 }],
    ]);
    expect((await memory.lastGood('press-1', 'inspect'))?.requestId).toBe('r2');
  });

  it('announces every answer when Sparkplug is on', async () => {
    const { sink, state } = outputs(undefined, { sparkplug: true });
    const events: ScadaEvent[] = [];
    await state.onAnnounce((e) => events.push(e));
    sink.answered({ deviceId: 'press-1', template: 'inspect', reply: ok('r1', { n: 1 }), atMs: 1 });
    await sink.idle();
    sink.answered({ deviceId: 'press-1', template: 'inspect', reply: failed('r2'), atMs: 2 });
    await sink.idle();
    expect(events.map((e) => (e.kind === 'answer' ? [e.answer.requestId, e.answer.quality, e.answer.data] : e.kind))).toEqual([
      ['r1', 'good', { n: 1 }],
      ['r2', 'bad', { n: 1 }],
    ]);
  });

  it('never throws into the reply and goes on after a failing store or broker', async () => {
    const memory = new MemoryScadaState(BOUNDS);
    const state: ScadaState = Object.assign(Object.create(memory) as ScadaState, {
      keepGood: async () => Promise.reject(new Error('Redis is away')),
      lastGood: async () => Promise.reject(new Error('Redis is away')),
    });
    let fail = true;
    const sent: string[] = [];
    const sink = new ScadaOutputs({
      state,
      uns: new UnsPublisher({
        config: uns,
        publish: async (topic) => (fail ? Promise.reject(new Error('broker away')) : void sent.push(topic)),
        maxTopics: 10,
      }),
      sparkplug: false,
      hasOutput: () => true,
      logger: silent,
    });
    expect(() => sink.answered({ deviceId: 'press-1', template: 't', reply: ok('r1', { n: 1 }), atMs: 1 })).not.toThrow();
    await sink.idle();
    fail = false;
    sink.answered({ deviceId: 'press-1', template: 't', reply: failed('r2'), atMs: 2 });
    await sink.idle();
    expect(sent).toEqual(['acme/plant-1/stamping/line-3/press-1/ai/t']);
    expect(sink.counts.failures).toBe(3); // keep, publish, then the last good read
  });

  it('clears the least recently published retained tag past maxTopics', async () => {
    const { sink, sent } = outputs(undefined, { maxTopics: 2 });
    for (const id of ['press-1', 'press-2', 'press-1', 'press-3']) {
      sink.answered({ deviceId: id, template: 't', reply: ok(id, { n: 1 }), atMs: 1 });
      await sink.idle();
    }
    expect(sent.map((s) => [s.topic.split('/')[4], s.payload === '' ? 'cleared' : 'tag', s.options.retain])).toEqual([
      ['press-1', 'tag', true],
      ['press-2', 'tag', true],
      ['press-1', 'tag', true],
      ['press-3', 'tag', true],
      ['press-2', 'cleared', true],
    ]);
  });
});

describe('UNS topic rules', () => {
  const observer: Identity = { role: 'observer', deviceId: undefined };
  const device: Identity = { role: 'device', deviceId: 'press-1' };
  const root = ['acme/plant-1/#'];

  it('lets observers read the UNS root when the broker is told it, and never lets devices publish there', () => {
    expect(maySubscribe(observer, 'acme/plant-1/#', root)).toBe(true);
    expect(maySubscribe(observer, 'acme/plant-1/+/+/press-1/ai/+', root)).toBe(true);
    expect(maySubscribe(observer, 'acme/plant-1/#')).toBe(false);
    expect(maySubscribe(observer, 'acme/#', root)).toBe(false);
    expect(maySubscribe(device, 'acme/plant-1/#', root)).toBe(false);
    expect(mayPublish(device, 'acme/plant-1/stamping/line-3/press-1/ai/inspect')).toBe(false);
    expect(mayPublish(observer, 'acme/plant-1/stamping/line-3/press-1/ai/inspect')).toBe(false);
  });
});
