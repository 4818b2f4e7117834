// Budgets (CONFIG_FILE `budgets`): tokens or cost a device, a model, a template or the whole
// fleet may use per day or month, the period starting at midnight in `timeZone`. What a
// request is charged is intake's (intake/budgets.ts); when a period ends, intake/budget-period.ts.
import { z } from 'zod';
import { DEVICE_PATTERN } from './fair-share.js';

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

const LimitSchema = z
  .strictObject({
    name: z.string().regex(NAME, '1 to 64 characters of A-Za-z0-9_.-'),
    per: z.enum(['device', 'model', 'template', 'fleet']),
    /** per device: the device id or `*` pattern it applies to (default `*`: every device). */
    devices: z.string().regex(DEVICE_PATTERN, 'a device id, or a pattern of A-Za-z0-9_.:- and *').default('*'),
    model: z.string().min(1).optional(),
    template: z.string().min(1).optional(),
    period: z.enum(['day', 'month']),
    tokens: z.number().positive().optional(),
    costUsd: z.number().positive().optional(),
    /** `critical` requests are counted but never refused. */
    exemptCritical: z.boolean().default(false),
  })
  .refine((l) => (l.tokens === undefined) !== (l.costUsd === undefined), 'give one of tokens and costUsd')
  .refine((l) => (l.per === 'model') === (l.model !== undefined), '`model` goes with per "model", and it needs one')
  .refine((l) => (l.per === 'template') === (l.template !== undefined), '`template` goes with per "template", and it needs one');

export const BudgetsSchema = z
  .strictObject({
    timeZone: z
      .string()
      .refine((tz) => validTimeZone(tz), 'an IANA time zone, e.g. Europe/Berlin')
      .default('UTC'),
    limits: z.array(LimitSchema).default([]),
  })
  .refine((b) => new Set(b.limits.map((l) => l.name)).size === b.limits.length, 'budget names must differ')
  .default({ timeZone: 'UTC', limits: [] });

export type Budgets = z.infer<typeof BudgetsSchema>;
export type BudgetLimit = Budgets['limits'][number];

function validTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}
