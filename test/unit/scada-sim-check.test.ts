// The Sparkplug session rules and UNS checks of scada-sim's checker, fed payloads encoded by
// the reference codec (sparkplug-payload), as a host would receive them.
import { createRequire } from 'node:module';
import sparkplug from 'sparkplug-payload';
import { describe, expect, it } from 'vitest';
import { SessionChecker, REBIRTH_RETRY_MS } from '../../scada-sim/check.js';
import type { UMetric, UPayload } from 'sparkplug-payload/lib/sparkplugbpayload.js';

const codec = sparkplug.get('spBv1.0');
if (codec === null) throw new Error('no spBv1.0 codec');
const T = 1_700_000_000_000;
const encode = (payload: UPayload): Buffer => Buffer.from(codec.encodePayload(payload));
const metric = (m: Partial<UMetric> & Pick<UMetric, 'type' | 'value'>): UMetric => ({ timestamp: T, ...m }) as UMetric;
const topic = (type: string, device?: string): string => `spBv1.0/plant/${type}/edge${device === undefined ? '' : `/${device}`}`;

const nbirth = (bdSeq = 1, seq = 0): Buffer =>
  encode({
    timestamp: T,
    seq,
    metrics: [metric({ name: 'bdSeq', type: 'Int64', value: bdSeq }), metric({ name: 'Node Control/Rebirth', type: 'Boolean', value: false })],
  });
const ndeath = (bdSeq: number): Buffer => encode({ timestamp: T, metrics: [metric({ name: 'bdSeq', type: 'Int64', value: bdSeq })] });
const dbirth = (seq: number): Buffer =>
  encode({
    timestamp: T,
    seq,
    metrics: [
      metric({ name: 'AI/inspect/ok', alias: 10, type: 'Boolean', value: true }),
      metric({ name: 'AI/inspect/score', alias: 11, type: 'Double', value: 0.5 }),
      metric({ name: 'AI/inspect/count', alias: 12, type: 'Int64', value: 3 }),
    ],
  });
const ddata = (seq: number, metrics: UMetric[]): Buffer => encode({ timestamp: T, seq, metrics });

/** A checker fed the messages in order; each entry is [type, payload, device?]. */
function run(messages: Array<[string, Buffer, string?]>, unsRoot?: string): SessionChecker {
  const checker = new SessionChecker(unsRoot === undefined ? {} : { unsRoot });
  messages.forEach(([type, payload, device], i) => checker.feed(topic(type, device), payload, false, T + i));
  return checker;
}

const cleanSession: Array<[string, Buffer, string?]> = [
  ['NBIRTH', nbirth(1)],
  ['DBIRTH', dbirth(1), 'cam1'],
  ['DDATA', ddata(2, [metric({ alias: 11, type: 'Double', value: 0.75 })]), 'cam1'],
  ['DDATA', ddata(3, [metric({ name: 'AI/inspect/ok', type: 'Boolean', value: false })]), 'cam1'],
  ['DDEATH', encode({ timestamp: T, seq: 4 }), 'cam1'],
  ['NDEATH', ndeath(1)],
];

describe('SessionChecker: Sparkplug sessions', () => {
  it('passes a clean session and keeps the tag table, stale after the deaths', () => {
    const checker = run(cleanSession);
    expect(checker.violations).toEqual([]);
    expect(checker.first()).toBeUndefined();
    const rows = checker.table().map((t) => [t.source, t.metric, t.value, t.type, t.quality]);
    expect(rows).toEqual([
      ['plant/edge', 'Node Control/Rebirth', false, 'Boolean', 'stale'],
      ['plant/edge', 'bdSeq', 1, 'Int64', 'stale'],
      ['plant/edge/cam1', 'AI/inspect/count', 3, 'Int64', 'stale'],
      ['plant/edge/cam1', 'AI/inspect/ok', false, 'Boolean', 'stale'],
      ['plant/edge/cam1', 'AI/inspect/score', 0.75, 'Double', 'stale'],
    ]);
    expect(checker.nodeStates()).toEqual([{ node: 'plant/edge', online: false, bdSeq: 1, devices: [] }]);
  });

  it('resolves aliases to the birth names and keeps the tags good while online', () => {
    const checker = run(cleanSession.slice(0, 3));
    const score = checker.table().find((t) => t.metric === 'AI/inspect/score');
    expect(score).toMatchObject({ source: 'plant/edge/cam1', value: 0.75, quality: 'good', timestampMs: T });
    expect(checker.nodeStates()[0]).toMatchObject({ online: true, devices: ['cam1'] });
  });

  it('accepts seq wrapping from 255 to 0', () => {
    const messages: Array<[string, Buffer, string?]> = [
      ['NBIRTH', nbirth(7)],
      ['DBIRTH', dbirth(1), 'cam1'],
    ];
    for (let seq = 2; seq <= 258; seq += 1) messages.push(['DDATA', ddata(seq % 256, [metric({ alias: 12, type: 'Int64', value: seq })]), 'cam1']);
    const checker = run(messages);
    expect(checker.violations).toEqual([]);
    expect(checker.table().find((t) => t.metric === 'AI/inspect/count')?.value).toBe(258);
  });

  it('names a seq gap and asks that node for a rebirth once', () => {
    const checker = new SessionChecker();
    checker.feed(topic('NBIRTH'), nbirth(1), false, T);
    checker.feed(topic('DBIRTH', 'cam1'), dbirth(1), false, T);
    const gap = checker.feed(topic('DDATA', 'cam1'), ddata(3, [metric({ alias: 11, type: 'Double', value: 1 })]), false, T);
    expect(gap.violations.map((v) => v.kind)).toEqual(['seq_gap']);
    expect(gap.violations[0]?.message).toContain('seq 3, expected 2');
    expect(gap.rebirth).toEqual({ group: 'plant', node: 'edge' });
    // The count is followed from the gap: the next message is in order; a new gap soon after is not asked again.
    expect(checker.feed(topic('DDATA', 'cam1'), ddata(4, [metric({ alias: 11, type: 'Double', value: 2 })]), false, T).violations).toEqual([]);
    const again = checker.feed(topic('DDATA', 'cam1'), ddata(9, []), false, T + 1);
    expect(again.violations.map((v) => v.kind)).toEqual(['seq_gap']);
    expect(again.rebirth).toBeUndefined();
    expect(checker.feed(topic('DDATA', 'cam1'), ddata(20, []), false, T + REBIRTH_RETRY_MS + 1).rebirth).toEqual({ group: 'plant', node: 'edge' });
    expect(checker.first()?.kind).toBe('seq_gap');
  });

  it('names an NBIRTH whose seq is not 0', () => {
    expect(run([['NBIRTH', nbirth(1, 5)]]).first()?.kind).toBe('seq_gap');
  });

  it('names data before the node birth, and asks for a rebirth', () => {
    const checker = new SessionChecker();
    const result = checker.feed(topic('NDATA'), encode({ timestamp: T, seq: 1, metrics: [] }), false, T);
    expect(result.violations.map((v) => v.kind)).toEqual(['data_before_birth']);
    expect(result.rebirth).toEqual({ group: 'plant', node: 'edge' });
    for (const [type, device] of [
      ['DBIRTH', 'cam1'],
      ['DDATA', 'cam1'],
      ['DDEATH', 'cam1'],
    ] as const) {
      expect(run([[type, dbirth(1), device]]).first()?.kind, type).toBe('data_before_birth');
    }
  });

  it('names DDATA before that device DBIRTH', () => {
    const checker = run([
      ['NBIRTH', nbirth(1)],
      ['DBIRTH', dbirth(1), 'cam1'],
      ['DDATA', ddata(2, [metric({ alias: 11, type: 'Double', value: 1 })]), 'cam2'],
    ]);
    expect(checker.first()).toMatchObject({ kind: 'data_before_birth', topic: 'spBv1.0/plant/DDATA/edge/cam2' });
    expect(checker.first()?.message).toContain("before that device's DBIRTH");
  });

  it('names data after the node death, before a new birth', () => {
    const checker = run([
      ['NBIRTH', nbirth(1)],
      ['NDEATH', ndeath(1)],
      ['NDATA', encode({ timestamp: T, seq: 1 })],
    ]);
    expect(checker.first()?.kind).toBe('data_before_birth');
  });

  it('names an NDEATH whose bdSeq is not the birth one, and ignores a stale one', () => {
    const mismatch = run([
      ['NBIRTH', nbirth(4)],
      ['NDEATH', ndeath(5)],
    ]);
    expect(mismatch.first()).toMatchObject({ kind: 'bdseq_mismatch' });
    expect(mismatch.nodeStates()[0]?.online).toBe(true);

    // The old connection's will (bdSeq 3) arrives after the new session's birth (bdSeq 4).
    const stale = run([
      ['NBIRTH', nbirth(3)],
      ['NBIRTH', nbirth(4)],
      ['NDEATH', ndeath(3)],
    ]);
    expect(stale.violations).toEqual([]);
    expect(stale.nodeStates()[0]?.online).toBe(true);
    expect(
      run([
        ['NBIRTH', nbirth(0)],
        ['NDEATH', ndeath(255)],
      ]).violations,
    ).toEqual([]);
  });

  it('names an NBIRTH without bdSeq', () => {
    const checker = run([['NBIRTH', encode({ timestamp: T, seq: 0, metrics: [metric({ name: 'x', type: 'Int32', value: 1 })] })]]);
    expect(checker.first()?.kind).toBe('nbirth_without_bdseq');
  });

  it('names an alias the birth did not declare, and a metric it did not list', () => {
    const base: Array<[string, Buffer, string?]> = [
      ['NBIRTH', nbirth(1)],
      ['DBIRTH', dbirth(1), 'cam1'],
    ];
    const alias = run([...base, ['DDATA', ddata(2, [metric({ alias: 99, type: 'Double', value: 1 })]), 'cam1']]);
    expect(alias.first()).toMatchObject({ kind: 'unknown_alias' });
    expect(alias.first()?.message).toContain('alias 99');
    const name = run([...base, ['DDATA', ddata(2, [metric({ name: 'AI/other', type: 'Double', value: 1 })]), 'cam1']]);
    expect(name.first()?.kind).toBe('unknown_metric');
  });

  it('names a type different from the birth', () => {
    const checker = run([
      ['NBIRTH', nbirth(1)],
      ['DBIRTH', dbirth(1), 'cam1'],
      ['DDATA', ddata(2, [metric({ alias: 11, type: 'String', value: 'x' })]), 'cam1'],
    ]);
    expect(checker.first()?.kind).toBe('type_changed');
    expect(checker.first()?.message).toContain('is String, its birth said Double');
  });

  it('names a metric without timestamp, in a birth or in data', () => {
    const noTs = { name: 'AI/inspect/ok', alias: 10, type: 'Boolean', value: true } as UMetric;
    const inBirth = run([
      ['NBIRTH', nbirth(1)],
      ['DBIRTH', encode({ timestamp: T, seq: 1, metrics: [noTs] }), 'cam1'],
    ]);
    expect(inBirth.first()?.kind).toBe('no_timestamp');
    const inData = run([
      ['NBIRTH', nbirth(1)],
      ['DBIRTH', dbirth(1), 'cam1'],
      ['DDATA', ddata(2, [{ alias: 10, type: 'Boolean', value: false } as UMetric]), 'cam1'],
    ]);
    expect(inData.first()?.kind).toBe('no_timestamp');
  });

  it('names a payload that is not Sparkplug B', () => {
    expect(run([['NBIRTH', Buffer.from('{"not":"protobuf"}')]]).first()?.kind).toBe('undecodable');
  });

  it('ignores STATE and command topics', () => {
    const checker = new SessionChecker();
    checker.feed('spBv1.0/STATE/scada', Buffer.from('{"online":true,"timestamp":1}'), true);
    checker.feed('spBv1.0/plant/NCMD/edge', encode({ timestamp: T, metrics: [metric({ name: 'Node Control/Rebirth', type: 'Boolean', value: true })] }), false);
    expect(checker.violations).toEqual([]);
    expect(checker.table()).toEqual([]);
  });
});

describe('SessionChecker: UNS payloads', () => {
  const good = { data: { ok: true, score: 0.9, label: 'scratch' }, quality: 'good', timestamp: T, requestId: 'r-1', model: 'm', latencyMs: 12 };
  const feed = (checker: SessionChecker, t: string, body: unknown, retained = true): ReturnType<SessionChecker['feed']> =>
    checker.feed(t, Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), retained, T);

  it('reads a retained UnsPayload into tags', () => {
    const checker = new SessionChecker({ unsRoot: 'acme' });
    expect(feed(checker, 'acme/line1/cam1/ai/inspect', good).violations).toEqual([]);
    expect(checker.table().map((t) => [t.source, t.metric, t.value, t.quality])).toEqual([
      ['acme/line1/cam1/ai/inspect', 'label', 'scratch', 'good'],
      ['acme/line1/cam1/ai/inspect', 'ok', true, 'good'],
      ['acme/line1/cam1/ai/inspect', 'score', 0.9, 'good'],
    ]);
    // A failure without a last good answer: one row with the error code.
    feed(checker, 'acme/line1/cam1/ai/inspect', { quality: 'bad', timestamp: T, requestId: 'r-2', error: 'unavailable' });
    expect(checker.table().map((t) => [t.metric, t.value, t.quality])).toEqual([['error', 'unavailable', 'bad']]);
    // An empty retained message clears the topic.
    checker.feed('acme/line1/cam1/ai/inspect', Buffer.alloc(0), true, T);
    expect(checker.table()).toEqual([]);
    expect(checker.violations).toEqual([]);
  });

  it('names a UNS message that is not retained', () => {
    const checker = new SessionChecker({ unsRoot: 'acme' });
    expect(feed(checker, 'acme/line1/cam1/ai/inspect', good, false).violations.map((v) => v.kind)).toEqual(['uns_not_retained']);
  });

  it('names a payload that does not match UnsPayloadSchema', () => {
    const checker = new SessionChecker({ unsRoot: 'acme' });
    expect(feed(checker, 'acme/a/b/ai/t', 'not json').violations.map((v) => v.kind)).toEqual(['uns_invalid']);
    expect(feed(checker, 'acme/a/b/ai/t', { ...good, quality: 'fine' }).violations[0]?.message).toContain('quality');
    expect(feed(checker, 'acme/a/b/ai/t', { ...good, data: { nested: { x: 1 } } }).violations.map((v) => v.kind)).toEqual(['uns_invalid']);
    expect(feed(checker, 'acme/a/b/ai/t', { ...good, timestamp: 1.5 }).violations.map((v) => v.kind)).toEqual(['uns_invalid']);
    expect(checker.violationCount).toBe(4);
  });

  it('leaves topics outside the root and the Sparkplug namespace alone', () => {
    const checker = new SessionChecker({ unsRoot: 'acme' });
    feed(checker, 'acmeX/a', 'junk', false);
    feed(checker, 'devices/cam1/result', 'junk', false);
    expect(checker.violations).toEqual([]);
  });
});

describe('SessionChecker: bounds', () => {
  it('keeps at most maxTags tags and maxViolations violations, counting the rest', () => {
    const checker = new SessionChecker({ unsRoot: 'r', maxTags: 2, maxViolations: 1 });
    for (let i = 0; i < 3; i += 1)
      checker.feed(`r/t${i}`, Buffer.from(JSON.stringify({ data: { v: i }, quality: 'good', timestamp: T, requestId: 'x' })), false, T);
    expect(checker.table()).toHaveLength(2);
    expect(checker.droppedTags).toBe(1);
    expect(checker.violations).toHaveLength(1);
    expect(checker.violationCount).toBe(3);
  });
});

describe('SessionChecker: DATA metrics without a datatype', () => {
  // sparkplug-payload always writes the datatype; Sparkplug 3.0 lets DATA leave it out.
  const require = createRequire(import.meta.url);
  const { org } = require('sparkplug-payload/lib/sparkplugPayloadProto.js') as typeof import('sparkplug-payload/lib/sparkplugPayloadProto.js');
  const raw = (seq: number, metrics: Array<Record<string, unknown>>): Buffer =>
    Buffer.from(org.eclipse.tahu.protobuf.Payload.encode({ timestamp: T, seq, metrics }).finish());

  it('reads their values with the birth types, signs included', () => {
    const birth = encode({
      timestamp: T,
      seq: 1,
      metrics: [
        metric({ name: 'i32', alias: 1, type: 'Int32', value: 0 }),
        metric({ name: 'i64', alias: 2, type: 'Int64', value: 0 }),
        metric({ name: 'd', alias: 3, type: 'Double', value: 0 }),
      ],
    });
    const data = raw(2, [
      { alias: 1, intValue: 0xfffffffe, timestamp: T },
      { alias: 2, longValue: '18446744073709551611' /* -5 as uint64 */, timestamp: T },
      { alias: 3, doubleValue: 2.5, timestamp: T },
    ]);
    const checker = run([
      ['NBIRTH', nbirth(1)],
      ['DBIRTH', birth, 'cam1'],
      ['DDATA', data, 'cam1'],
    ]);
    expect(checker.violations).toEqual([]);
    expect(
      checker
        .table()
        .filter((t) => t.source === 'plant/edge/cam1')
        .map((t) => [t.metric, t.value]),
    ).toEqual([
      ['d', 2.5],
      ['i32', -2],
      ['i64', -5],
    ]);
  });
});
