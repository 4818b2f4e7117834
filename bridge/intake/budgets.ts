// A request's charges against the CONFIG_FILE budgets, estimated at admission: its token
// estimate, and that estimate priced for the model it names (or the default one).
import { chargesFor, type BudgetCharge, type Budgets } from '../config/budgets.js';
import { priceOf, type Price } from '../config/models.js';
import { BridgeError, isEmbeddingRequest } from '../../contract/index.js';
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
  const price = priceOf(settings.prices, model);
  const completionEstimate = job.tokenEstimate - promptEstimate;
  const costUsd = price ? (promptEstimate * price.inputPerMillion + completionEstimate * price.outputPerMillion) / 1e6 : 0;
  return chargesFor(settings.budgets, { deviceId: job.deviceId, priority: job.priority, model, template: job.template, tokens: job.tokenEstimate, costUsd }, now);
}

/**
 * The refusal of a request `charge` had no room for. Refused by what its budget has used: it
 * may try again when the period ends. Refused only because other requests hold reservations
 * in it: when the first of them may have settled (`inFlightRetryMs`), not at the period's end.
 */
export function budgetRefusal(charge: BudgetCharge, inFlight: boolean, inFlightRetryMs: number, now: number): BridgeError {
  const whose = charge.subject === '*' ? '' : ` for ${charge.subject}`;
  if (inFlight) {
    return new BridgeError('budget_exceeded', `budget "${charge.budget}"${whose} is reserved by requests in flight: retry when they settle`, Math.max(0, inFlightRetryMs));
  }
  const until = new Date(charge.resetAtMs).toISOString();
  return new BridgeError('budget_exceeded', `budget "${charge.budget}"${whose} is used up until ${until}`, Math.max(0, charge.resetAtMs - now));
}
