// Raw camera images: a camera publishes the image bytes themselves (no base64, no JSON) and
// names the template that asks about them. What a payload's bytes say it is: Checked by magic bytes at the start and
// the format's own end (JPEG's end-of-image marker, PNG's IEND chunk, WebP's RIFF length), so a
// frame cut short in transit, or anything that only starts like an image, is refused.
import { createHash } from 'node:crypto';
import {
  BridgeError,
  mediaType,
  REQUEST_ID_PATTERN,
  TemplateRequestSchema,
  type InferTopic,
  type RequestProperties,
  type TemplateRequest,
} from '../../contract/index.js';
import type { JobImage } from '../model/job.js';

export type ImageMime = 'image/jpeg' | 'image/png' | 'image/webp';
type ImageTopic = Extract<InferTopic, { kind: 'image' }>;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** The IEND chunk: length 0, type, CRC: the last 12 bytes of every PNG. */
const PNG_IEND = Buffer.from([0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]);

/** The image's type, or why the bytes are not a whole JPEG, PNG or WebP image. */
export function imageFormat(bytes: Buffer): { mime: ImageMime } | { problem: string } {
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) {
    return endsWith(bytes, [0xff, 0xd9]) ? { mime: 'image/jpeg' } : { problem: 'JPEG is truncated: no end-of-image marker' };
  }
  if (bytes.subarray(0, 8).equals(PNG_SIGNATURE)) {
    return bytes.length >= 8 + PNG_IEND.length && bytes.subarray(-PNG_IEND.length).equals(PNG_IEND)
      ? { mime: 'image/png' }
      : { problem: 'PNG is truncated: no IEND chunk at its end' };
  }
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') {
    // RIFF's size counts everything after its first 8 bytes.
    return bytes.readUInt32LE(4) + 8 === bytes.length ? { mime: 'image/webp' } : { problem: 'WebP is truncated: its RIFF size does not match' };
  }
  return { problem: 'payload is not a JPEG, PNG or WebP image' };
}

function endsWith(bytes: Buffer, tail: number[]): boolean {
  if (bytes.length < tail.length) return false;
  return tail.every((b, i) => bytes[bytes.length - tail.length + i] === b);
}

/** What an image request's topic or MQTT 5 user properties name: the template and the request id. */
function nameOf(topicValue: string | undefined, properties: RequestProperties, name: string): string | undefined {
  if (topicValue !== undefined) return topicValue;
  const value = properties.userProperties?.[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The request id of an image request, for its reply: from the topic, else the MQTT 5 user property `id`. */
export function imageRequestId(topic: Pick<ImageTopic, 'requestId'>, properties: RequestProperties): string | null {
  const id = nameOf(topic.requestId, properties, 'id');
  return id !== undefined && REQUEST_ID_PATTERN.test(id) ? id : null;
}

/** MQTT 5 user properties `var.{name}`: the template's vars, as strings. */
function varsOf(properties: RequestProperties): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const [name, value] of Object.entries(properties.userProperties ?? {})) {
    if (name.startsWith('var.')) vars[name.slice(4)] = Array.isArray(value) ? (value[0] ?? '') : value;
  }
  return vars;
}

/**
 * A raw image on `devices/{id}/image/{priority}[/{template}/{requestId}]` as the template request
 * it asks, and the image itself; BridgeError naming the cause when it cannot be one.
 */
export function readImage(topic: ImageTopic, payload: Buffer, properties: RequestProperties, maxBytes: number): { parsed: TemplateRequest; image: JobImage } {
  // Present is enough here: the schema below names what is wrong with a bad id or template.
  const id = nameOf(topic.requestId, properties, 'id');
  const template = nameOf(topic.template, properties, 'template');
  if (id === undefined || template === undefined) {
    throw new BridgeError(
      'invalid_request',
      `an image names its template and request id: devices/{id}/image/{priority}/{template}/{requestId}, or the MQTT 5 user properties template and id`,
    );
  }
  if (payload.length > maxBytes) throw new BridgeError('payload_too_large', `image is ${payload.length} bytes, over IMAGE_MAX_BYTES (${maxBytes})`);
  const format = imageFormat(payload);
  if ('problem' in format) throw new BridgeError('invalid_request', format.problem);
  const declared = properties.contentType;
  if (declared !== undefined && mediaType(declared) !== format.mime) {
    throw new BridgeError('invalid_request', `Content Type ${declared} does not match the image (${format.mime})`);
  }
  const parsed = TemplateRequestSchema.safeParse({ id, template, vars: varsOf(properties) });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new BridgeError('invalid_request', issue ? `${issue.path.map(String).join('.')}: ${issue.message}` : 'bad image request');
  }
  const sha256 = createHash('sha256').update(payload).digest('hex');
  return { parsed: parsed.data, image: { mime: format.mime, sha256, bytes: payload.length, base64: payload.toString('base64') } };
}
