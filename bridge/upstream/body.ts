// The body sent upstream for a device request, chat or embeddings, and which endpoint it goes to.
import {
  EMBEDDING_PASSTHROUGH_FIELDS,
  PASSTHROUGH_FIELDS,
  isEmbeddingRequest,
  type ChatMessage,
  type InferRequest,
} from '../../contract/index.js';

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
