// OpenAI wire conventions every route of the upstream simulator shares: model names, error
// bodies and the token estimate behind `usage`.

export const DEFAULT_MODEL = 'sim-model';
export const EMBEDDING_MODEL = 'sim-embedding';

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function openAiError(message: string, type: string, code: string | null = null): unknown {
  return { error: { message, type, param: null, code } };
}

export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}
