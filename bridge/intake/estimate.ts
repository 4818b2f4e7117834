// A request's token estimate, and the bounds it must keep at admission. The estimate is what
// its claim takes from RATE_LIMIT_TPM's window and its budgets reserve, so a device must not be
// able to make it large: max_tokens is capped (MAX_TOKENS_CAP, or the model's own `maxTokens`),
// and an estimate the whole TPM budget cannot hold is refused, since it could only run by
// stopping every other device's calls until the window emptied. The model a device names is
// checked here too: listed (with `onlyListedModels`) and, while a budget counts cost, priced.
import type { Budgets } from '../config/budgets.js';
import type { Config } from '../config/config.js';
import { costBudget, DEFAULT_PRICE, modelEntry, priceOf } from '../config/models.js';
import { BridgeError, isEmbeddingRequest, type ChatRequest, type InferRequest } from '../../contract/index.js';

export type EstimateConfig = Pick<Config, 'maxTokensCap' | 'rateLimitTpm' | 'upstreamModel'> & {
  file: Pick<Config['file'], 'models' | 'onlyListedModels' | 'prices' | 'embeddingModel'>;
};

export interface Estimate {
  /** Tokens in: the request's size / 4 (an image counted as what it costs). */
  prompt: number;
  /** Tokens out at most: max_completion_tokens or max_tokens (or a default), times n. */
  completion: number;
}

/** Tokens of a default completion when a request names no max_tokens. */
export const DEFAULT_COMPLETION_TOKENS = 256;
/** Allowed models named in a refusal, at most: the list may be long, the reply stays short. */
const NAMED_MODELS = 10;

/** The tokens in of a request, estimated from its size. */
export const promptTokensOf = (payloadBytes: number): number => Math.ceil(payloadBytes / 4);

/**
 * The estimate of a valid request of `payloadBytes`, or BridgeError invalid_request when its
 * model is not allowed or not priced (`budgets`: the budgets in force), a max_tokens field is
 * over its cap, or the whole estimate is over RATE_LIMIT_TPM.
 */
export function estimateOf(request: InferRequest, payloadBytes: number, config: EstimateConfig, budgets?: Budgets): Estimate {
  const embedding = isEmbeddingRequest(request);
  const model = request.model ?? (embedding ? config.file.embeddingModel : config.upstreamModel);
  if (request.model !== undefined) checkListed(request.model, config);
  if (budgets) checkPriced(model, config, budgets);
  const prompt = promptTokensOf(payloadBytes);
  // An embeddings answer has no completion tokens.
  const completion = embedding ? 0 : completionTokens(request, model, config);
  const tpm = config.rateLimitTpm;
  if (tpm !== undefined && prompt + completion > tpm) throw overTpm(request, prompt, completion, tpm);
  return { prompt, completion };
}

function checkListed(model: string, { file }: EstimateConfig): void {
  if (!file.onlyListedModels || modelEntry(file.models, model)) return;
  const names = Object.keys(file.models);
  const shown = names
    .slice(0, NAMED_MODELS)
    .map((n) => `"${n}"`)
    .join(', ');
  const more = names.length > NAMED_MODELS ? ` and ${names.length - NAMED_MODELS} more` : '';
  const allowed = names.length === 0 ? 'none may be named: leave `model` out' : `allowed: ${shown}${more}`;
  throw new BridgeError('invalid_request', `model "${model}" is not offered (${allowed})`);
}

function checkPriced(model: string, { file }: EstimateConfig, budgets: Budgets): void {
  const budget = costBudget(budgets);
  if (budget === undefined || priceOf(file.prices, model)) return;
  throw new BridgeError('invalid_request', `model "${model}" has no price (nor a default "${DEFAULT_PRICE}"), and budget "${budget}" counts cost`);
}

/** Out at most: the field asked (each checked against its cap), or the default, times n. */
function completionTokens(request: ChatRequest, model: string, { maxTokensCap, file }: EstimateConfig): number {
  const own = modelEntry(file.models, model)?.maxTokens;
  const cap = own ?? maxTokensCap;
  for (const field of ['max_tokens', 'max_completion_tokens'] as const) {
    const asked = request[field];
    if (asked !== undefined && asked > cap) {
      const source = own === undefined ? 'MAX_TOKENS_CAP' : `CONFIG_FILE models."${model}".maxTokens`;
      throw new BridgeError('invalid_request', `${field}: ${asked} is over the cap of ${cap} (${source})`);
    }
  }
  return (request.max_completion_tokens ?? request.max_tokens ?? DEFAULT_COMPLETION_TOKENS) * (request.n ?? 1);
}

function overTpm(request: InferRequest, prompt: number, completion: number, tpm: number): BridgeError {
  if (isEmbeddingRequest(request)) {
    return new BridgeError('invalid_request', `input: its estimate of ${prompt} tokens is over RATE_LIMIT_TPM (${tpm}), which one call may use at most`);
  }
  const field = request.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
  const asked = request.max_completion_tokens ?? request.max_tokens ?? DEFAULT_COMPLETION_TOKENS;
  const times = request.n === undefined || request.n === 1 ? '' : ` × n ${request.n}`;
  return new BridgeError(
    'invalid_request',
    `${field}: ${asked}${times} with a prompt of ~${prompt} tokens is ${prompt + completion} tokens, over RATE_LIMIT_TPM (${tpm}), which one call may use at most`,
  );
}
