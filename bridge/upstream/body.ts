import { PASSTHROUGH_FIELDS, type ChatMessage, type InferRequest } from '../contract.js';

export interface UpstreamBody {
  model: string;
  messages: ChatMessage[];
  [field: string]: unknown;
}

/**
 * The chat-completions body for a device request: only the fields the contract passes
 * through, so bridge-only fields (id, lock, ttl_ms, cache) never reach the upstream.
 */
export function buildUpstreamBody(request: InferRequest, defaultModel: string): UpstreamBody {
  const body: UpstreamBody = { model: request.model ?? defaultModel, messages: request.messages };
  for (const field of PASSTHROUGH_FIELDS) {
    const value = request[field];
    if (value !== undefined) body[field] = value;
  }
  return body;
}
