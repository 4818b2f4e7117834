// The body sent upstream for a device request, chat or embeddings, and which endpoint it goes to.
import {
  BridgeError,
  EMBEDDING_PASSTHROUGH_FIELDS,
  PASSTHROUGH_FIELDS,
  isEmbeddingRequest,
  type ChatMessage,
  type InferRequest,
} from '../../contract/index.js';
import { imageRef, type JobImage } from '../store/types.js';

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
export function buildUpstreamBody(request: InferRequest, defaultModel: string, image?: JobImage): UpstreamBody {
  const model = request.model ?? defaultModel;
  if (isEmbeddingRequest(request)) {
    const body: EmbeddingsBody = { model, input: request.input };
    for (const field of EMBEDDING_PASSTHROUGH_FIELDS) {
      const value = request[field];
      if (value !== undefined) body[field] = value;
    }
    return body;
  }
  const body: ChatBody = { model, messages: image ? withImageData(request.messages, image) : request.messages };
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

/** The messages with the image's reference replaced by its data URL, built only for the call. */
function withImageData(messages: ChatMessage[], image: JobImage): ChatMessage[] {
  if (image.base64 === undefined) {
    throw new BridgeError('invalid_request', 'the image of this request was not kept (a replayed dead letter): publish it again');
  }
  const ref = imageRef(image.sha256);
  const url = `data:${image.mime};base64,${image.base64}`;
  return messages.map((m) => {
    if (!Array.isArray(m.content)) return m;
    const content = m.content.map((part) => {
      const target = part['image_url'] as { url?: unknown } | undefined;
      return part.type === 'image_url' && target?.url === ref ? { ...part, image_url: { ...target, url } } : part;
    });
    return { ...m, content };
  });
}
