// A request's charges against the CONFIG_FILE budgets, estimated at admission: its token
// estimate, and that estimate priced for the model it names (or the default one).
import { matchesDevice } from '../config/fair-share.js';
import type { BudgetLimit, Budgets } from '../config/budgets.js';
import { periodAt } from './budget-period.js';
import type { BudgetCharge } from '../model/budget-charge.js';
import { priceOf, type Price } from '../config/models.js';
import { BridgeError, isEmbeddingRequest } from '../../contract/index.js';
import type { Job } from '../model/job.js';

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
  return chargesFor(
    settings.budgets,
    { deviceId: job.deviceId, priority: job.priority, model, template: job.template, tokens: job.tokenEstimate, costUsd },
    now,
  );
}

/**
 * The refusal of a request `charge` had no room for. Refused by what its budget has used: it
 * may try again when the period ends. Refused only because other requests hold reservations
 * in it: when the first of them may have settled (`inFlightRetryMs`), not at the period's end.
 */
export function budgetRefusal(charge: BudgetCharge, inFlight: boolean, inFlightRetryMs: number, now: number): BridgeError {
  const whose = charge.subject === '*' ? '' : ` for ${charge.subject}`;
  if (inFlight) {
    return new BridgeError(
      'budget_exceeded',
      `budget "${charge.budget}"${whose} is reserved by requests in flight: retry when they settle`,
      Math.max(0, inFlightRetryMs),
    );
  }
  const until = new Date(charge.resetAtMs).toISOString();
  return new BridgeError('budget_exceeded', `budget "${charge.budget}"${whose} is used up until ${until}`, Math.max(0, charge.resetAtMs - now));
}

export interface Chargeable {
  deviceId: string;
  priority: string;
  model: string;
  template?: string | undefined;
  tokens: number;
  costUsd: number;
}

/**
 * The budgets a request counts against, each with its estimate: the device's own budget
 * (its id's, else the first pattern it matches), every budget of its model and template,
 * and the fleet's.
 */
export function chargesFor(budgets: Budgets, request: Chargeable, now: number): BudgetCharge[] {
  const device = budgets.limits.filter((l) => l.per === 'device');
  const own = device.find((l) => l.devices === request.deviceId) ?? device.find((l) => matchesDevice(l.devices, request.deviceId));
  const applies = (l: BudgetLimit): boolean =>
    l === own || l.per === 'fleet' || (l.per === 'model' && l.model === request.model) || (l.per === 'template' && l.template === request.template);
  return budgets.limits.filter(applies).map((l) => {
    const { label, endMs } = periodAt(l.period, budgets.timeZone, now);
    const unit = l.tokens === undefined ? 'usd' : 'tokens';
    return {
      budget: l.name,
      period: label,
      subject: l.per === 'device' ? request.deviceId : '*',
      unit,
      limit: (l.tokens ?? l.costUsd) as number,
      estimate: unit === 'tokens' ? request.tokens : request.costUsd,
      exempt: l.exemptCritical && request.priority === 'critical',
      resetAtMs: endMs,
    };
  });
}
