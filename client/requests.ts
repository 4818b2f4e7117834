// What each kind of call publishes: a JSON request on the infer topic, or raw image bytes on
// the image topic. Ids are fresh UUIDs unless the caller gives one, and stay for every attempt.
import { randomUUID } from 'node:crypto';
import type { ChatRequest, EmbeddingRequest, TemplateRequest } from '../contract/index.js';
import { REQUEST_ID_PATTERN, TEMPLATE_NAME_PATTERN, topics, type Priority } from '../contract/names.js';
import type { Outgoing } from './call.js';

type WithOptionalId<T> = Omit<T, 'id'> & { id?: string };
export type ChatInput = WithOptionalId<ChatRequest>;
export type EmbeddingInput = WithOptionalId<EmbeddingRequest>;
export type TemplateInput = WithOptionalId<Omit<TemplateRequest, 'vars'>> & { vars?: TemplateRequest['vars'] };
/** Any request a device may publish on its infer topic. */
export type AnyRequest = ChatInput | EmbeddingInput | TemplateInput;

export interface Prepared {
  id: string;
  build: (timeLeftMs: number) => Outgoing;
}

function requestId(given: unknown): string {
  if (given === undefined) return randomUUID();
  if (typeof given !== 'string' || !REQUEST_ID_PATTERN.test(given)) throw new TypeError('id must be 1 to 64 characters of A-Za-z0-9._:-');
  return given;
}

/**
 * A JSON request. Unless it sets `ttl_ms`, each attempt carries the time left of the call's
 * deadline, so the bridge does not pay for an answer nobody waits for.
 */
export function jsonRequest(deviceId: string, priority: Priority, request: AnyRequest): Prepared {
  if (typeof request !== 'object' || request === null) throw new TypeError('a request must be an object');
  const { id: givenId, ...fields } = request;
  const id = requestId(givenId);
  const topic = topics.infer(deviceId, priority);
  // The id first: the bridge reads it from the head of a payload too large to parse, so even
  // that refusal reaches this call. Serialised once; an attempt only appends its ttl_ms.
  const body = JSON.stringify({ id, ...fields });
  if (request.ttl_ms !== undefined) return { id, build: () => ({ topic, payload: body }) };
  const open = body.slice(0, -1);
  return { id, build: (timeLeftMs) => ({ topic, payload: `${open},"ttl_ms":${Math.max(1, Math.floor(timeLeftMs))}}` }) };
}

export interface ImageInput {
  template: string;
  /** The template's vars, sent as MQTT 5 user properties `var.{name}`. */
  vars?: Record<string, string | number>;
  id?: string;
}

/** A raw camera image; on MQTT 5 its deadline goes as the Message Expiry Interval. */
export function imageRequest(deviceId: string, priority: Priority, bytes: Uint8Array, input: ImageInput, mqtt5: boolean): Prepared {
  if (!TEMPLATE_NAME_PATTERN.test(input.template ?? '')) throw new TypeError('template must be 1 to 64 characters of A-Za-z0-9_.-');
  const vars = Object.entries(input.vars ?? {});
  if (vars.length > 0 && !mqtt5) throw new TypeError('an image with vars needs MQTT 5 (they go as user properties)');
  const id = requestId(input.id);
  const topic = topics.image(deviceId, priority, input.template, id);
  const payload = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const userProperties = Object.fromEntries(vars.map(([name, value]) => [`var.${name}`, String(value)]));
  return {
    id,
    build: (timeLeftMs) => ({
      topic,
      payload,
      ...(mqtt5 ? { expirySeconds: Math.max(1, Math.ceil(timeLeftMs / 1000)) } : {}),
      ...(vars.length > 0 ? { userProperties } : {}),
    }),
  };
}
