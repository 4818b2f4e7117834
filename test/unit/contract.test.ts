// The request schema: chat (`messages`) or embeddings (`input`), never both, each with its
// own parameters; and the embeddings fields of an ok reply.
import { describe, expect, it } from 'vitest';
import {
  InferRequestSchema,
  MAX_EMBEDDING_INPUTS,
  MAX_RESPONSE_TOPIC_BYTES,
  OkReplySchema,
  isEmbeddingRequest,
  requestKind,
  responseTopicProblem,
  type InferRequest,
} from '../../contract/index.js';
import { cacheKeyOf } from '../../bridge/intake/cache-key.js';
import { buildUpstreamBody } from '../../bridge/upstream/body.js';

const messages = [{ role: 'user', content: 'Is there a scratch?' }];

/** The schema's first message, as intake reports it (`path: message`). */
function violation(body: unknown): string {
  const parsed = InferRequestSchema.safeParse(body);
  if (parsed.success) throw new Error(`expected a violation for ${JSON.stringify(body)}`);
  const issue = parsed.error.issues[0];
  const path = issue?.path.map(String).join('.') ?? '';
  return path ? `${path}: ${issue?.message}` : (issue?.message ?? '');
}

function parse(body: unknown): InferRequest {
  return InferRequestSchema.parse(body) as InferRequest;
}

describe('InferRequestSchema: chat', () => {
  it('accepts a chat request as before, and it is not an embeddings request', () => {
    const request = parse({ id: 'c1', messages, max_tokens: 64, temperature: 0.2, lock: 'l', ttl_ms: 100, cache: true });
    expect(request).toMatchObject({ id: 'c1', messages, max_tokens: 64 });
    expect(isEmbeddingRequest(request)).toBe(false);
    expect(requestKind(request)).toBe('chat');
  });

  it('refuses a field it does not know, naming it, and keeps every OpenAI parameter it does', () => {
    expect(violation({ id: 'c2', messages, max_token: 5 })).toBe('unknown field "max_token"');
    expect(violation({ id: 'c2', messages, foo: 1, bar: 2 })).toBe('unknown field "foo", "bar"');
    expect(violation({ id: 'e2', input: 'x', user: 'u' })).toBe('unknown field "user"');
    expect(violation({ id: 'c2', messages, response_format: { type: 'json_schema' } })).toBe(
      'response_format.json_schema: type json_schema needs json_schema: {"name", "schema"}',
    );
    expect(violation({ id: 'c2', messages, response_format: { type: 'json_schema', json_schema: { name: 'bad name' } } })).toBe(
      'response_format.json_schema.name: must be 1 to 64 characters of A-Za-z0-9_-',
    );
    const huge = { type: 'json_schema', json_schema: { name: 'big', schema: { description: 'x'.repeat(70_000) } } };
    expect(violation({ id: 'c2', messages, response_format: huge })).toBe('response_format: must be at most 65536 characters of JSON');
    expect(violation({ id: 'c2', messages: [{ role: 'tool', content: '42' }] })).toBe('messages.0.tool_call_id: a tool message needs tool_call_id');
    expect(violation({ id: 'c2', messages: [{ role: 'bot', content: 'hi' }] })).toBe(
      'messages.0.role: must be one of system, developer, user, assistant, tool, function',
    );
    const openai = {
      user: 'x',
      n: 2,
      logprobs: true,
      top_logprobs: 1,
      max_completion_tokens: 8,
      frequency_penalty: 1,
      presence_penalty: -1,
      logit_bias: { '7': 1 },
      tool_choice: 'none',
      parallel_tool_calls: true,
    };
    expect(parse({ id: 'c2', messages, ...openai })).toEqual({ id: 'c2', messages, ...openai });
  });

  it('refuses embeddings parameters on a chat request, naming the field', () => {
    expect(violation({ id: 'c3', messages, dimensions: 8 })).toBe(
      'dimensions: dimensions applies to embeddings requests (input), not to chat requests (messages)',
    );
    expect(violation({ id: 'c4', messages, encoding_format: 'float' })).toMatch(/^encoding_format: encoding_format applies to embeddings/);
  });

  it('reports chat violations as before', () => {
    expect(violation({ id: 'c5', messages: [] })).toMatch(/^messages: /);
    expect(violation({ id: 'bad id!', messages })).toBe('id: must be 1 to 64 characters of A-Za-z0-9._:-');
    expect(violation(5)).toMatch(/expected object/);
  });
});

describe('InferRequestSchema: embeddings', () => {
  it('accepts a string input with model, dimensions, encoding_format float and the bridge fields', () => {
    const request = parse({
      id: 'e1',
      input: 'scratch on part 7',
      model: 'text-embedding-3-large',
      dimensions: 256,
      encoding_format: 'float',
      lock: 'line-3',
      ttl_ms: 5000,
      cache: false,
    });
    expect(isEmbeddingRequest(request)).toBe(true);
    expect(requestKind(request)).toBe('embeddings');
    if (!isEmbeddingRequest(request)) throw new Error('narrowing');
    expect(request.input).toBe('scratch on part 7');
    expect(request.dimensions).toBe(256);
  });

  it(`accepts an array of 1 to ${MAX_EMBEDDING_INPUTS} strings`, () => {
    expect(isEmbeddingRequest(parse({ id: 'e2', input: ['a'] }))).toBe(true);
    expect(isEmbeddingRequest(parse({ id: 'e3', input: Array.from({ length: MAX_EMBEDDING_INPUTS }, (_, i) => `s${i}`) }))).toBe(true);
  });

  it('refuses an empty or malformed input', () => {
    expect(violation({ id: 'e4', input: '' })).toBe('input: must not be empty');
    expect(violation({ id: 'e5', input: [] })).toBe('input: must hold at least one string');
    expect(violation({ id: 'e6', input: ['a', ''] })).toBe('input.1: must not be empty');
    expect(violation({ id: 'e7', input: Array.from({ length: MAX_EMBEDDING_INPUTS + 1 }, () => 'x') })).toMatch(/^input: /);
    expect(violation({ id: 'e8', input: 42 })).toBe(`input: must be a non-empty string or an array of 1 to ${MAX_EMBEDDING_INPUTS} non-empty strings`);
    expect(violation({ id: 'e9', input: [1, 2] })).toMatch(/^input/);
  });

  it('refuses base64 encoding with a clear message, and bad dimensions', () => {
    expect(violation({ id: 'e10', input: 'x', encoding_format: 'base64' })).toBe(
      'encoding_format: only "float" is supported: the reply carries the vectors as numbers',
    );
    expect(violation({ id: 'e11', input: 'x', dimensions: 0 })).toMatch(/^dimensions: /);
    expect(violation({ id: 'e12', input: 'x', dimensions: 1.5 })).toMatch(/^dimensions: /);
  });

  it.each(['max_tokens', 'temperature', 'top_p', 'stop', 'response_format', 'seed'])('refuses the chat parameter %s, naming it', (field) => {
    expect(violation({ id: 'e13', input: 'x', [field]: field === 'stop' ? '\n' : 1 })).toBe(
      `${field}: ${field} applies to chat requests (messages), not to embeddings requests (input)`,
    );
  });
});

describe('InferRequestSchema: exactly one of messages or input', () => {
  it('refuses both', () => {
    expect(violation({ id: 'b1', messages, input: 'x' })).toBe('give one of messages (chat), input (embeddings) or template, not messages and input');
  });

  it('refuses neither', () => {
    expect(violation({ id: 'b2' })).toBe('messages: missing: give messages (chat), input (embeddings) or template');
  });
});

describe('embeddings: upstream body and cache key', () => {
  const policy = { ttlS: 300, allowTemperature: false, defaultModel: 'gpt-4o-mini', defaultEmbeddingModel: 'text-embedding-3-small' };

  it('builds {model, input, dimensions?, encoding_format?} and nothing else', () => {
    const request = parse({ id: 'u1', input: ['a', 'b'], dimensions: 64, encoding_format: 'float', lock: 'l', ttl_ms: 9 });
    expect(buildUpstreamBody(request, 'text-embedding-3-small')).toEqual({
      model: 'text-embedding-3-small',
      input: ['a', 'b'],
      dimensions: 64,
      encoding_format: 'float',
    });
    expect(buildUpstreamBody(parse({ id: 'u2', input: 'a', model: 'emb-x' }), 'text-embedding-3-small')).toEqual({ model: 'emb-x', input: 'a' });
  });

  it('keys embeddings apart from chat, and by input, model and dimensions', () => {
    const key = (body: unknown): string | undefined => cacheKeyOf(parse(body), policy, 'null');
    const base = key({ id: 'k1', input: 'hello' });
    expect(base).toBeDefined();
    expect(key({ id: 'k2', input: 'hello' })).toBe(base); // never the id
    expect(key({ id: 'k3', input: 'hello', model: 'text-embedding-3-small' })).toBe(base); // the default model, named
    expect(key({ id: 'k4', input: ['hello'] })).not.toBe(base);
    expect(key({ id: 'k5', input: 'hello', dimensions: 4 })).not.toBe(base);
    expect(key({ id: 'k6', input: 'hello', model: 'other' })).not.toBe(base);
    expect(key({ id: 'k7', input: 'hello', cache: false })).toBeUndefined();
    expect(key({ id: 'k8', messages: [{ role: 'user', content: 'hello' }] })).not.toBe(base);
  });
});

describe('OkReplySchema: embeddings', () => {
  const ok = {
    id: 'e1',
    ok: true,
    model: 'text-embedding-3-small',
    content: null,
    finish_reason: null,
    usage: { prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 },
    cached: false,
    attempts: 1,
    priority: 'normal',
    timing: { queued_ms: 0, upstream_ms: 3, total_ms: 4 },
  };

  it('carries `embedding` or `embeddings` as numbers', () => {
    expect(OkReplySchema.parse({ ...ok, embedding: [0.1, -0.2] }).embedding).toEqual([0.1, -0.2]);
    expect(OkReplySchema.parse({ ...ok, embeddings: [[1], [2]] }).embeddings).toEqual([[1], [2]]);
    expect(OkReplySchema.safeParse({ ...ok, embedding: 'AAAA' }).success).toBe(false);
  });
});

describe('responseTopicProblem', () => {
  it('bounds a Response Topic in bytes and never echoes a long one', () => {
    const own = 'devices/cam-1/';
    expect(responseTopicProblem('cam-1', `${own}${'r'.repeat(MAX_RESPONSE_TOPIC_BYTES - own.length)}`)).toBeNull();
    const problem = responseTopicProblem('cam-1', `${own}${'ラ'.repeat(MAX_RESPONSE_TOPIC_BYTES)}`);
    expect(problem).toMatch(new RegExp(`^response topic is \\d+ bytes, over ${MAX_RESPONSE_TOPIC_BYTES}$`));
  });
});
