// A request's charges against the CONFIG_FILE budgets, estimated at admission: its token
// estimate, and that estimate priced for the model it names (or the default one).
import { chargesFor, type BudgetCharge, type Budgets } from '../config/budgets.js';
import type { Price } from '../config/config-file.js';
import { isEmbeddingRequest } from '../../contract/index.js';
import type { Job } from '../store/types.js';

export interface BudgetSettings {
  budgets: Budgets;
  prices: Record<string, Price>;
  defaultModel: string;
  defaultEmbeddingModel: string;
}

/** `promptEstimate`: the tokens in of the job's `tokenEstimate`; the rest is tokens out. */
export function budgetCharges(settings: BudgetSettings, job: Job, promptEstimate: number, now: number): BudgetCharge[] {
  if (settings.budgets.limits.length === 0) return [];
  const { request } = job;
  const model = request.model ?? (isEmbeddingRequest(request) ? settings.defaultEmbeddingModel : settings.defaultModel);
  const price = settings.prices[model];
  const completionEstimate = job.tokenEstimate - promptEstimate;
  const costUsd = price ? (promptEstimate * price.inputPerMillion + completionEstimate * price.outputPerMillion) / 1e6 : 0;
  return chargesFor(settings.budgets, { deviceId: job.deviceId, priority: job.priority, model, template: job.template, tokens: job.tokenEstimate, costUsd }, now);
}
