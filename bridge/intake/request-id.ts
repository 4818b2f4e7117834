// The request id an error reply names: read from the parsed body, or sniffed from the head of
// a payload too large to parse (JSON or CBOR), so even that reply names its request.
import type { InboundRequest } from '../../contract/index.js';
import { imageRequestId } from './image.js';

/** An id is echoed in error replies only while it is plausibly the device's own. */
const MAX_ECHOED_ID = 256;
const ID_SNIFF_BYTES = 1024;
const CBOR_ID_KEY = Buffer.from([0x62, 0x69, 0x64]);

export function readId(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || !('id' in body)) return null;
  const { id } = body as { id: unknown };
  return typeof id === 'string' && id.length <= MAX_ECHOED_ID ? id : null;
}

/** Reads `"id"` from the head of a payload too large to parse, so even that reply names its request. */
export function sniffId(payload: Buffer): string | null {
  const head = payload.subarray(0, ID_SNIFF_BYTES).toString('utf8');
  return /"id"\s*:\s*"([A-Za-z0-9._:-]{1,64})"/.exec(head)?.[1] ?? null;
}

/**
 * The same from CBOR: the text key `id` (0x62 "id") followed by a short text string, read
 * when it is the bytes of a plausible id.
 */
export function sniffCborId(payload: Buffer): string | null {
  const head = payload.subarray(0, ID_SNIFF_BYTES);
  const at = head.indexOf(CBOR_ID_KEY);
  if (at < 0) return null;
  const header = head[at + CBOR_ID_KEY.length] ?? 0;
  const short = header >= 0x61 && header <= 0x77;
  const length = short ? header - 0x60 : header === 0x78 ? (head[at + CBOR_ID_KEY.length + 1] ?? 0) : 0;
  const start = at + CBOR_ID_KEY.length + (short ? 1 : 2);
  const id = head.subarray(start, start + length).toString('utf8');
  return length > 0 && id.length === length && /^[A-Za-z0-9._:-]{1,64}$/.test(id) ? id : null;
}

/** The id a refusal names when the publish was refused unread: sniffed from its head (or its image topic). */
export function sniffedId({ topic, payload, properties }: InboundRequest, cbor: boolean): string | null {
  if (topic.kind === 'image' || topic.kind === 'bad_image_topic') return imageRequestId(topic, properties);
  return cbor ? sniffCborId(payload) : sniffId(payload);
}
