// MQTT-shaped inputs: topics (wrong, long, foreign, unicode, wildcards), MQTT 5 properties,
// raw camera images, persistent sessions that never read, subscriptions, and packets that
// break the protocol, whole or cut short.
import fc from 'fast-check';
import * as mqttPacket from 'mqtt-packet';
import type { IPublishPacket } from 'mqtt-packet';
import type { IdentityAction, PublishAction, RawAction, SessionAction, SubscribeAction } from './actions.js';
import { nastyString, priority, requestId, validChat, type InputContext } from './values.js';

const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
const qos = fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>;

export function publish(
  topic: fc.Arbitrary<string>,
  payload: fc.Arbitrary<Buffer>,
  properties?: fc.Arbitrary<IPublishPacket['properties']>,
): fc.Arbitrary<PublishAction> {
  return fc.record({
    op: fc.constant('publish' as const),
    topic,
    payload,
    qos: fc.oneof({ weight: 4, arbitrary: fc.constant(1 as const) }, { weight: 1, arbitrary: qos }),
    retain: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    properties: properties ?? fc.constant(undefined),
    copies: fc.constant(1),
  });
}

export const ownInfer = (ctx: InputContext): fc.Arbitrary<string> => priority.map((p) => `devices/${ctx.self}/infer/${p}`);

/** Topics no request should come from: other devices', wildcards, long, unicode, cut short. */
export function badTopic(ctx: InputContext): fc.Arbitrary<string> {
  const self = `devices/${ctx.self}`;
  return fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 64 }).map((p) => `${self}/infer/${p}`),
    fc.constantFrom(
      `devices/${ctx.innocent}/infer/critical`,
      `devices/${ctx.innocent}/result`,
      `devices/${ctx.innocent}/image/high/x/y`,
      `${self}/infer/normal/extra`,
      `${self}/infer`,
      `${self}/infer/+`,
      `${self}/#`,
      'devices/+/infer/normal',
      '#',
      '$SYS/broker',
      'bridge/x/status',
      '',
      '/',
      `${self}//infer/normal`,
      `devices/${ctx.self}\u0000/infer/normal`,
    ),
    fc.integer({ min: 200, max: 65_000 }).map((n) => `${self}/infer/${'n'.repeat(n)}`),
    fc.integer({ min: 200, max: 65_000 }).map((n) => `${self}/${'a/'.repeat(n / 2)}`),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 200 }),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 200 }).map((s) => `devices/${s}/infer/normal`),
  );
}

const userProperties = fc.dictionary(
  fc.oneof(fc.constantFrom('template', 'id', 'var.part', 'var.mm', 'content-type'), fc.string({ maxLength: 64 })),
  fc.oneof(
    fc.string({ maxLength: 64 }),
    fc.array(fc.string({ maxLength: 16 }), { maxLength: 50 }),
    fc.integer({ min: 1, max: 60_000 }).map((n) => 'v'.repeat(n)),
  ),
  { maxKeys: 40 },
);

/** MQTT 5 publish properties: user properties, response topics anywhere, correlation data, expiry, content types. */
export function properties(ctx: InputContext): fc.Arbitrary<IPublishPacket['properties']> {
  return fc.record(
    {
      userProperties,
      responseTopic: fc.oneof(fc.constant(`devices/${ctx.self}/result`), fc.constant(`devices/${ctx.innocent}/result`), badTopic(ctx)),
      correlationData: fc.uint8Array({ maxLength: 65_535 }).map((b) => Buffer.from(b)),
      messageExpiryInterval: fc.oneof(fc.constantFrom(0, 1, 2 ** 32 - 1), fc.integer({ min: 0, max: 2 ** 32 - 1 })),
      contentType: fc.oneof(fc.constantFrom('application/json', 'application/cbor', 'image/jpeg', 'text/plain', ''), nastyString),
      payloadFormatIndicator: fc.boolean(),
      topicAlias: fc.integer({ min: 0, max: 65_535 }),
    },
    { requiredKeys: [] },
  );
}

/** Bytes that pass for a JPEG, PNG or WebP by their start and end, or almost do. */
export function imageBytes(ctx: InputContext): fc.Arbitrary<Buffer> {
  const size = fc.oneof(
    { weight: 6, arbitrary: fc.integer({ min: 0, max: 4096 }) },
    { weight: 1, arbitrary: fc.integer({ min: ctx.imageMaxBytes - 16, max: ctx.imageMaxBytes + 1024 }) },
  );
  const wrap =
    (head: number[], tail: number[]) =>
    (n: number, fill: number): Buffer =>
      Buffer.concat([Buffer.from(head), Buffer.alloc(n, fill), Buffer.from(tail)]);
  const riff = (n: number, fill: number): Buffer => {
    const b = Buffer.concat([Buffer.from('RIFF0000WEBPVP8 '), Buffer.alloc(n, fill)]);
    b.writeUInt32LE(b.length - 8, 4);
    return b;
  };
  const forms = [
    wrap([0xff, 0xd8, 0xff, 0xe0], [0xff, 0xd9]),
    wrap([0xff, 0xd8, 0xff], []),
    wrap([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], [0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]),
    riff,
  ];
  return fc.oneof(
    fc.tuple(fc.constantFrom(...forms), size, fc.integer({ min: 0, max: 255 })).map(([form, n, fill]) => form(n, fill)),
    fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
  );
}

export function imagePublish(ctx: InputContext): fc.Arbitrary<PublishAction> {
  const template = fc.oneof(fc.constantFrom(ctx.templates.image, ctx.templates.chat, 'unknown-template'), fc.string({ maxLength: 70 }));
  const topic = fc.oneof(
    fc.tuple(priority, template, requestId).map(([p, t, id]) => `devices/${ctx.self}/image/${p}/${t}/${id}`),
    priority.map((p) => `devices/${ctx.self}/image/${p}`),
    fc.string({ maxLength: 40 }).map((rest) => `devices/${ctx.self}/image/${rest}`),
  );
  const props = fc.record(
    { contentType: fc.constantFrom('image/jpeg', 'image/png', 'image/webp', 'application/json', 'text/plain'), userProperties },
    { requiredKeys: [] },
  );
  return publish(topic, imageBytes(ctx), props);
}

export function templatePayload(ctx: InputContext): fc.Arbitrary<Buffer> {
  const vars = fc.dictionary(
    fc.oneof(fc.constantFrom('part', 'mm'), fc.string({ maxLength: 70 })),
    fc.oneof(fc.string({ maxLength: 5000 }), fc.double(), fc.constant('{{part}}'), fc.jsonValue({ maxDepth: 2 })),
    { maxKeys: 40 },
  );
  const name = fc.oneof(fc.constantFrom(ctx.templates.chat, ctx.templates.image, 'nope', ''), fc.string({ maxLength: 70 }));
  return fc
    .record(
      { id: requestId, template: name, vars, lock: nastyString, model: fc.constantFrom('sim-model', 'gpt-4o', 'x'), stream: fc.boolean() },
      { requiredKeys: ['id', 'template'] },
    )
    .map(json);
}

/** The same valid request, published 2 to 50 times back to back. */
export function duplicates(ctx: InputContext): fc.Arbitrary<PublishAction> {
  return fc
    .tuple(publish(ownInfer(ctx), validChat.map(json)), fc.integer({ min: 2, max: 50 }))
    .map(([action, copies]) => ({ ...action, qos: 1 as const, copies }));
}

export function session(ctx: InputContext): fc.Arbitrary<SessionAction> {
  const own = `devices/${ctx.self}`;
  return fc.record({
    op: fc.constant('session' as const),
    suffix: fc.oneof(
      fc.integer({ min: 0, max: 15 }).map((i) => `s${i}`),
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }),
    ),
    version: fc.constantFrom(4, 5) as fc.Arbitrary<4 | 5>,
    expiryS: fc.option(fc.oneof(fc.constantFrom(0, 2 ** 32 - 1), fc.integer({ min: 1, max: 2 ** 32 - 1 })), { nil: undefined }),
    filters: fc.array(
      fc.oneof(
        fc.constantFrom(`${own}/result`, `${own}/#`, `${own}/stream`),
        fc.integer({ min: 1, max: 2000 }).map((n) => `${own}/${'f'.repeat(n)}`),
      ),
      { minLength: 1, maxLength: 5 },
    ),
    leave: fc.constantFrom('disconnect', 'stall', 'vanish') as fc.Arbitrary<SessionAction['leave']>,
    holdMs: fc.integer({ min: 0, max: 10_000 }),
  });
}

export function subscribe(ctx: InputContext): fc.Arbitrary<SubscribeAction> {
  const own = `devices/${ctx.self}`;
  const filter = fc.oneof(
    fc.constantFrom(
      `${own}/result`,
      `${own}/#`,
      '#',
      '+/+/#',
      `devices/${ctx.innocent}/result`,
      'devices/+/result',
      '$share/g/devices/+/result',
      '$SYS/#',
      'a/#/b',
      'a+',
      '',
    ),
    fc.integer({ min: 100, max: 65_000 }).map((n) => `${own}/${'L'.repeat(n)}`),
    fc.string({ unit: 'grapheme', maxLength: 100 }).map((s) => `${own}/${s}`),
  );
  const subscription = fc.record({
    topic: filter,
    qos: fc.constantFrom(0, 1, 2) as fc.Arbitrary<0 | 1 | 2>,
    nl: fc.boolean(),
    rap: fc.boolean(),
    rh: fc.constantFrom(0, 1, 2),
  });
  return fc.record({
    op: fc.constant('subscribe' as const),
    subscriptions: fc.array(subscription, { minLength: 1, maxLength: 50 }),
    unsubscribe: fc.boolean(),
  });
}

export function identity(ctx: InputContext): fc.Arbitrary<IdentityAction> {
  const clientId = fc.oneof(
    { weight: 3, arbitrary: fc.stringMatching(/^[a-z0-9]{1,8}$/).map((s) => `${ctx.innocent}.${s}`) },
    { weight: 1, arbitrary: fc.constant(ctx.innocent) },
  );
  const request = publish(fc.constant(`devices/${ctx.innocent}/infer/normal`), validChat.map(json));
  return fc.record({
    op: fc.constant('identity' as const),
    clientId,
    publish: fc.tuple(request, fc.integer({ min: 1, max: 20 })).map(([p, copies]) => ({ ...p, copies })),
    subscribe: fc.boolean(),
    holdMs: fc.integer({ min: 0, max: 2000 }),
  });
}

/** A packet mqtt-packet can write, from fields a broker must check. */
function packetArb(ctx: InputContext): fc.Arbitrary<mqttPacket.Packet> {
  const id = fc.integer({ min: 0, max: 65_535 });
  return fc.oneof(
    fc.record({
      cmd: fc.constant('publish' as const),
      topic: fc.oneof(ownInfer(ctx), badTopic(ctx)),
      payload: fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
      qos,
      dup: fc.boolean(),
      retain: fc.boolean(),
      messageId: id,
      properties: properties(ctx),
    }),
    fc.record({ cmd: fc.constant('pubrel' as const), messageId: id }),
    fc.record({ cmd: fc.constant('puback' as const), messageId: id }),
    fc.record({ cmd: fc.constant('pubrec' as const), messageId: id }),
    fc.record({ cmd: fc.constant('pingreq' as const) }),
    fc.record({ cmd: fc.constant('connect' as const), clientId: fc.string() }),
    fc.record({ cmd: fc.constant('auth' as const), reasonCode: fc.constantFrom(0, 0x18, 0x19) }),
  ) as fc.Arbitrary<mqttPacket.Packet>;
}

function connectArb(ctx: InputContext): fc.Arbitrary<mqttPacket.IConnectPacket> {
  return fc.record(
    {
      cmd: fc.constant('connect' as const),
      clientId: fc.oneof(
        fc.constant(ctx.self),
        fc.stringMatching(/^[a-z]{1,6}$/).map((s) => `${ctx.self}.${s}`),
        fc.string({ unit: 'grapheme', maxLength: 100 }),
        fc.constant(''),
      ),
      protocolVersion: fc.constantFrom(3, 4, 5) as fc.Arbitrary<3 | 4 | 5>,
      clean: fc.boolean(),
      keepalive: fc.integer({ min: 0, max: 65_535 }),
      username: fc.string({ maxLength: 40 }),
      will: fc.record({
        topic: fc.oneof(ownInfer(ctx), badTopic(ctx)),
        payload: fc.uint8Array({ maxLength: 1024 }).map((b) => Buffer.from(b)),
        qos,
        retain: fc.boolean(),
      }),
      properties: fc.record(
        {
          sessionExpiryInterval: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
          receiveMaximum: fc.integer({ min: 1, max: 65_535 }),
          maximumPacketSize: fc.integer({ min: 1, max: 2 ** 28 }),
          topicAliasMaximum: fc.integer({ min: 0, max: 65_535 }),
          userProperties,
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ['cmd', 'clientId', 'protocolVersion'] },
  );
}

function encodeOr(packet: mqttPacket.Packet, version: number, fallback: Buffer): Buffer {
  try {
    return mqttPacket.generate(packet, { protocolVersion: version });
  } catch {
    return fallback;
  }
}

/** Packets whole, cut short, with bytes flipped, or bytes that were never MQTT. */
export function raw(ctx: InputContext): fc.Arbitrary<RawAction> {
  const cut = fc.tuple(fc.boolean(), fc.nat(), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }));
  const mangle = ([shorten, at, flips]: [boolean, number, Array<[number, number]>], bytes: Buffer): Buffer => {
    const out = Buffer.from(shorten && bytes.length > 1 ? bytes.subarray(0, at % bytes.length) : bytes);
    for (const [i, v] of flips) if (out.length > 0) out[i % out.length] = v;
    return out;
  };
  const session = fc.tuple(connectArb(ctx), cut, fc.array(fc.tuple(packetArb(ctx), cut), { maxLength: 8 })).map(([connect, c, packets]) => {
    const version = connect.protocolVersion ?? 4;
    return [
      mangle(c, encodeOr(connect, version, Buffer.from([0x10, 0]))),
      ...packets.map(([p, pc]) => mangle(pc, encodeOr(p, version, Buffer.from([0xc0, 0])))),
    ];
  });
  const chunks: fc.Arbitrary<Buffer[]> = fc.oneof(
    session,
    fc.array(
      fc.uint8Array({ minLength: 1, maxLength: 4096 }).map((b) => Buffer.from(b)),
      { minLength: 1, maxLength: 4 },
    ),
    fc.constantFrom<Buffer[]>(
      [Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f])],
      [Buffer.from([0x30, 0xff, 0xff, 0xff, 0x7f, 0, 1, 0x61])],
      [Buffer.from([0x10, 0xff, 0xff, 0xff, 0xff, 0x01])],
      [Buffer.from('GET / HTTP/1.1\r\n\r\n')],
    ),
  );
  return fc.record({ op: fc.constant('raw' as const), chunks, holdMs: fc.integer({ min: 0, max: 3000 }), stall: fc.boolean() });
}
