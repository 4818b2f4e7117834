// CONFIG_FILE `models` and `prices`: the models devices may name (with `onlyListedModels`),
// where each is served, the largest max_tokens it may be asked for, and what it costs. A model
// a device names is a way to spend: unlisted or unpriced, it must not slip past a limit.
import { z } from 'zod';
import type { Budgets } from './budgets.js';

/** The price of every model `prices` does not name. */
export const DEFAULT_PRICE = '*';

const ModelSchema = z.strictObject({
  /** The provider that serves it (tried first). */
  provider: z.string().min(1).optional(),
  /** The model name sent upstream (an alias's target). */
  model: z.string().min(1).optional(),
  /** The largest max_tokens (or max_completion_tokens) a request for it may ask; default MAX_TOKENS_CAP. */
  maxTokens: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
});

export const ModelsSchema = z.record(z.string().min(1).max(256), ModelSchema).default({});
export type ModelSettings = z.infer<typeof ModelSchema>;

const PriceSchema = z.strictObject({
  inputPerMillion: z.number().nonnegative(),
  outputPerMillion: z.number().nonnegative(),
});
export type Price = z.infer<typeof PriceSchema>;

export const PricesSchema = z.record(z.string().min(1), PriceSchema).default({});

const ownPrice = (prices: Record<string, Price>, model: string | undefined): Price | undefined =>
  model !== undefined && Object.hasOwn(prices, model) ? prices[model] : undefined;

/**
 * A model's price: its own, else that of the model asked for (an upstream may answer with a
 * dated name, gpt-4o-2024-08-06), else the default (`*`); undefined when there is none.
 */
export function priceOf(prices: Record<string, Price>, model: string, asked?: string): Price | undefined {
  return ownPrice(prices, model) ?? ownPrice(prices, asked) ?? prices[DEFAULT_PRICE];
}

/** A listed model's settings (own entries only: a name like `constructor` is just a name). */
export function modelEntry(models: Record<string, ModelSettings>, model: string): ModelSettings | undefined {
  return Object.hasOwn(models, model) ? models[model] : undefined;
}

/** The first budget that counts cost, if any: then every model a request names needs a price. */
export function costBudget(budgets: Budgets): string | undefined {
  return budgets.limits.find((l) => l.costUsd !== undefined)?.name;
}

/** A problem of the file: where in it, and what. */
type Issue = { path: PropertyKey[]; message: string };

interface FileParts {
  models: Record<string, ModelSettings>;
  onlyListedModels: boolean;
  prices: Record<string, Price>;
  budgets: Budgets;
  templates: Record<string, { model?: string | undefined; max_tokens?: number | undefined; priority_route?: Partial<Record<string, string>> | undefined }>;
}

/**
 * What the schema cannot see: with `onlyListedModels`, a template's model that is not listed;
 * with a cost budget, a listed model (or a per-model budget's) without a price.
 */
export function modelProblems(file: FileParts): Issue[] {
  const problems: Issue[] = [];
  if (file.onlyListedModels) {
    for (const [name, t] of Object.entries(file.templates)) {
      const named = [['model', t.model], ...Object.entries(t.priority_route ?? {}).map(([p, m]) => [`priority_route.${p}`, m])];
      for (const [field, model] of named) {
        if (model !== undefined && !modelEntry(file.models, model)) {
          problems.push({ path: ['templates', name, ...(field ?? '').split('.')], message: `model "${model}" is not in \`models\` (onlyListedModels)` });
        }
      }
    }
  }
  const budget = costBudget(file.budgets);
  if (budget === undefined) return problems;
  const named = [
    ...file.budgets.limits.flatMap((l, i) => (l.model === undefined ? [] : [{ model: l.model, path: ['budgets', 'limits', i, 'model'] }])),
    ...(file.onlyListedModels ? Object.keys(file.models).map((model) => ({ model, path: ['models', model] })) : []),
  ];
  for (const { model, path } of named) {
    if (!priceOf(file.prices, model))
      problems.push({ path, message: `model "${model}" has no price in \`prices\` (nor a default "${DEFAULT_PRICE}"), and budget "${budget}" counts cost` });
  }
  return problems;
}

/**
 * What needs the environment too: with a cost budget, the default model (UPSTREAM_MODEL) must
 * have a price; a template's max_tokens must be within the cap of each model it may go to.
 */
export function modelEnvProblems(file: Pick<FileParts, 'prices' | 'budgets' | 'models' | 'templates'>, upstreamModel: string, maxTokensCap: number): Issue[] {
  const problems: Issue[] = [];
  const budget = costBudget(file.budgets);
  if (budget !== undefined && !priceOf(file.prices, upstreamModel)) {
    problems.push({
      path: ['prices'],
      message: `UPSTREAM_MODEL "${upstreamModel}" has no price (nor a default "${DEFAULT_PRICE}"), and budget "${budget}" counts cost`,
    });
  }
  for (const [name, t] of Object.entries(file.templates)) {
    if (t.max_tokens === undefined) continue;
    for (const model of new Set([t.model ?? upstreamModel, ...Object.values(t.priority_route ?? {})])) {
      const cap = (model === undefined ? undefined : modelEntry(file.models, model)?.maxTokens) ?? maxTokensCap;
      if (t.max_tokens > cap)
        problems.push({ path: ['templates', name, 'max_tokens'], message: `${t.max_tokens} is over the cap of ${cap} for model "${model}"` });
    }
  }
  return problems;
}
