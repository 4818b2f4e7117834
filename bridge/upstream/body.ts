// The body sent upstream for a device request, chat or embeddings, and which endpoint it goes to.
import {
  BridgeError,
  EMBEDDING_PASSTHROUGH_FIELDS,
  PASSTHROUGH_FIELDS,
  isEmbeddingRequest,
  type ChatMessage,
  type InferRequest,
} from '../../contract/index.js';
import { imageRef, type JobImage } from '../model/job.js';
import type { OutputFormat } from './output-check.js';

/** POST {baseUrl}/chat/completions. */
export interface ChatBody {
  model: string;
  messages: ChatMessage[];
  [field: string]: unknown;
}

/** POST {baseUrl}/embeddings. */
export interface EmbeddingsBody {
  model: string;
  input: string | string[];
  [field: string]: unknown;
}

export type UpstreamBody = ChatBody | EmbeddingsBody;

/**
 * The upstream body for a device request: only the fields the contract passes through for
 * its kind, so bridge-only fields (id, lock, ttl_ms, cache) never reach the upstream.
 * `defaultModel` applies when the request names none: the caller passes UPSTREAM_MODEL for
 * chat and CONFIG_FILE `embeddingModel` for embeddings.
 */
export function buildUpstreamBody(request: InferRequest, defaultModel: string): UpstreamBody {
  const model = request.model ?? defaultModel;
  if (isEmbeddingRequest(request)) {
    const body: EmbeddingsBody = { model, input: request.input };
    for (const field of EMBEDDING_PASSTHROUGH_FIELDS) {
      const value = request[field];
      if (value !== undefined) body[field] = value;
    }
    return body;
  }
  const body: ChatBody = { model, messages: request.messages };
  for (const field of PASSTHROUGH_FIELDS) {
    const value = request[field];
    if (value !== undefined) body[field] = value;
  }
  return body;
}

/** Which endpoint a body goes to: an `input` makes it an embeddings call. */
export function isEmbeddingsBody(body: UpstreamBody): body is EmbeddingsBody {
  return 'input' in body && body.input !== undefined;
}

/**
 * A raw camera image as the upstream gets it: its data URL, put into the body's JSON in place
 * of its reference (`"url":"{ref}"`, which no text can spell unescaped) once the body is JSON,
 * so the base64 of the image is not scanned again for characters to escape.
 */
export interface InlineImage {
  ref: string;
  url: string;
}

export function inlineImage(image: JobImage | undefined): InlineImage | undefined {
  if (image === undefined) return undefined;
  if (image.base64 === undefined) {
    throw new BridgeError('invalid_request', 'the image of this request was not kept (a replayed dead letter): publish it again');
  }
  return { ref: imageRef(image.sha256), url: `data:${image.mime};base64,${image.base64}` };
}

/** `json` with the image's data URL in place of its reference. */
export function withInlineImage(json: string, inline: InlineImage | undefined): string {
  if (inline === undefined) return json;
  const at = json.indexOf(`"url":"${inline.ref}"`);
  if (at < 0) return json;
  const start = at + '"url":"'.length;
  return json.slice(0, start) + inline.url + json.slice(start + inline.ref.length);
}

/**
 * A chat body asking for a template's output: in strict mode from a provider with structured
 * outputs, else as a JSON object with the schema in a system message ahead of the others.
 */
export function withOutputFormat(body: UpstreamBody, output: OutputFormat, structured: boolean): UpstreamBody {
  if (isEmbeddingsBody(body)) return body;
  if (structured) return { ...body, response_format: { type: 'json_schema', json_schema: { name: output.name, strict: true, schema: output.schema } } };
  return { ...body, messages: [{ role: 'system', content: output.instruction }, ...(body as ChatBody).messages], response_format: { type: 'json_object' } };
}
