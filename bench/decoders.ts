// What the request-path decoders cost, in one process: the attack payloads (a CBOR bignum around
// a large byte string, JSON nested 100 000 deep) read by cbor-x / JSON.parse alone and by the
// intake's checked decoding, and the checks' cost on plain requests. Prints Markdown on stdout.
//
//   npm run build && node dist/bench/decoders.js [--skip-quadratic]
import { parseArgs } from 'node:util';
import { Decoder, encode, type Options } from 'cbor-x';
import { cborProblem } from '../contract/cbor-scan.js';
import { jsonNestingProblem } from '../contract/json-depth.js';
import { decodePayload } from '../bridge/intake/payload.js';

const { values } = parseArgs({ options: { 'skip-quadratic': { type: 'boolean', default: false } } });
const plainCbor = new Decoder({ mapsAsObjects: true, int64AsNumber: true } as Options);

/** `{"id": "a", "v": tag 2 around `bytes` bytes}`. */
function bignum(bytes: number): Buffer {
  const head = Buffer.from([0xa2, 0x62, 0x69, 0x64, 0x61, 0x61, 0x61, 0x76, 0xc2, 0x5a, 0, 0, 0, 0]);
  head.writeUInt32BE(bytes, 10);
  return Buffer.concat([head, Buffer.alloc(bytes, 0xff)]);
}

/** Milliseconds per call of `fn`, the median of `runs` timed batches of `calls`. */
function msPerCall(fn: () => unknown, calls = 1, runs = 1): number {
  const times: number[] = [];
  for (let r = 0; r < runs; r++) {
    const started = performance.now();
    for (let i = 0; i < calls; i++) {
      try {
        fn();
      } catch {
        // a refusal is the outcome being timed
      }
    }
    times.push((performance.now() - started) / calls);
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)] as number;
}

const fmt = (ms: number): string => (ms >= 10 ? ms.toFixed(0) : ms.toFixed(3));
const row = (cells: string[]): void => console.log(`| ${cells.join(' | ')} |`);

console.log('| payload | bytes | library alone, ms | checked decoding, ms | answer |');
console.log('| --- | --- | --- | --- | --- |');
for (const size of [16_384, 32_768, 65_536, 262_000]) {
  const payload = bignum(size);
  const quadratic = values['skip-quadratic'] && size > 65_536;
  const alone = quadratic ? 'skipped' : fmt(msPerCall(() => plainCbor.decode(payload)));
  row([
    `CBOR bignum (tag 2) around a byte string`,
    String(payload.length),
    alone,
    fmt(msPerCall(() => decodePayload(payload, true, { id: null }), 100, 5)),
    String(cborProblem(payload)),
  ]);
}
const deep = Buffer.from('{"id":"d","messages":[{"role":"user","content":"x","name":' + '['.repeat(100_000) + ']'.repeat(100_000) + '}]}');
row([
  'JSON, an array 100 000 deep in a message',
  String(deep.length),
  `${fmt(msPerCall(() => JSON.parse(deep.toString()), 10, 5))} (then a stack overflow in the cache key)`,
  fmt(msPerCall(() => decodePayload(deep, false, { id: null }), 100, 5)),
  String(jsonNestingProblem(deep)),
]);

console.log('\n| plain request | bytes | parse alone, µs | scan only, µs | checked decoding, µs |');
console.log('| --- | --- | --- | --- | --- |');
const chat = {
  id: 'r-000123',
  model: 'gpt-4o-mini',
  messages: [{ role: 'user', content: 'Is there a scratch on this part? Line 3, station 7, part A7.' }],
  max_tokens: 256,
  temperature: 0.2,
};
const big = { ...chat, messages: [{ role: 'user', content: 'x'.repeat(200_000) }] };
for (const [name, value] of [
  ['chat', chat],
  ['chat, 200 KB of text', big],
] as const) {
  const json = Buffer.from(JSON.stringify(value));
  const cbor = encode(value);
  const us = (fn: () => unknown): string => (msPerCall(fn, 2000, 5) * 1000).toFixed(2);
  row([
    `${name}, JSON`,
    String(json.length),
    us(() => JSON.parse(json.toString())),
    us(() => jsonNestingProblem(json)),
    us(() => decodePayload(json, false, { id: null })),
  ]);
  row([`${name}, CBOR`, String(cbor.length), us(() => plainCbor.decode(cbor)), us(() => cborProblem(cbor)), us(() => decodePayload(cbor, true, { id: null }))]);
}
