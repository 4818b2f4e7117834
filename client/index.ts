// edge-ai-bridge/client: device code's side of the bridge (docs/clients.md). Its only
// run-time dependency is mqtt; the payload types come from the contract.
export { BridgeClient, type BatchResult } from './client.js';
export { BridgeConnectError, BridgeRequestError, RETRYABLE_CODES, type ClientErrorCode } from './errors.js';
export type { CallOptions, ConnectOptions } from './options.js';
export type { AnyRequest, ChatInput, EmbeddingInput, ImageInput, TemplateInput } from './requests.js';
export type { BridgeStream, StreamEvent } from './stream.js';
export type { ChatRequest, EmbeddingRequest, ErrorCode, ErrorReply, OkReply, Priority, Reply, TemplateRequest } from '../contract/index.js';
