// POST /v1/embeddings for the upstream simulator: the request check and deterministic
// vectors, so equal inputs embed equally.
import { createHash } from 'node:crypto';
import { EMBEDDING_MODEL, estimateTokens } from './openai.js';

const EMBEDDING_DIMENSIONS = 8;
/** The largest `dimensions` the simulator honours (OpenAI's largest model has 3072). */
const MAX_EMBEDDING_DIMENSIONS = 4096;

/**
 * Deterministic unit vector from a hash of the input, so equal inputs embed equally;
 * `dimensions` long (each further 16 components come from another hash of the input).
 */
export function simEmbedding(text: string, dimensions = EMBEDDING_DIMENSIONS): number[] {
  const raw: number[] = [];
  let digest = createHash('sha256').update(text).digest();
  for (let i = 0; i < dimensions; i++) {
    if (i > 0 && i % 16 === 0)
      digest = createHash('sha256')
        .update(`${text}\u0000${i / 16}`)
        .digest();
    raw.push(digest.readUInt16BE((i % 16) * 2) / 32767.5 - 1);
  }
  const norm = Math.hypot(...raw) || 1;
  return raw.map((v) => Math.round((v / norm) * 1e6) / 1e6);
}

/** A 400 message when an embeddings body (already a JSON object) cannot be answered, else null. */
export function checkEmbeddings(body: Record<string, unknown>): string | null {
  if (
    body.dimensions !== undefined &&
    !(Number.isInteger(body.dimensions) && (body.dimensions as number) > 0 && (body.dimensions as number) <= MAX_EMBEDDING_DIMENSIONS)
  ) {
    return `'dimensions' must be an integer from 1 to ${MAX_EMBEDDING_DIMENSIONS}`;
  }
  const input = body.input;
  const ok = (typeof input === 'string' && input !== '') || (Array.isArray(input) && input.length > 0 && input.every((s) => typeof s === 'string'));
  return ok ? null : "'input' must be a non-empty string or an array of strings";
}

/** The embeddings list for a checked body. */
export function embeddingsAnswer(body: Record<string, unknown>): unknown {
  const model = typeof body.model === 'string' && body.model !== '' ? body.model : EMBEDDING_MODEL;
  const inputs = typeof body.input === 'string' ? [body.input] : (body.input as string[]);
  const tokens = inputs.reduce((acc, s) => acc + estimateTokens(s), 0);
  const dimensions = typeof body.dimensions === 'number' ? body.dimensions : EMBEDDING_DIMENSIONS;
  return {
    object: 'list',
    data: inputs.map((s, index) => ({ object: 'embedding', index, embedding: simEmbedding(s, dimensions) })),
    model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
