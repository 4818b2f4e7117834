// A template's reply as SCADA reads it: a good answer (its typed data) or a bad one (the
// reply's error code). Only templates that declare `output` become tags: prose is not a value.
import { FIELD_NAME_PATTERN, type Reply, type ScadaAnswer, type TypedData } from '../../contract/index.js';

/** A template request's reply on its way out, as Results hands it to the SCADA outputs. */
export interface TemplateAnswer {
  deviceId: string;
  template: string;
  reply: Reply;
  atMs: number;
}

/** Takes every template request's reply; must not throw nor wait (the reply is sent regardless). */
export interface AnswerSink {
  answered(answer: TemplateAnswer): void;
}

/**
 * The ScadaAnswer of a template reply, or undefined when there is none to publish: the
 * template declares no `output` (`hasOutput` false), or an ok reply carries no typed data.
 */
export function scadaAnswerOf({ deviceId, template, reply, atMs }: TemplateAnswer, hasOutput: boolean): ScadaAnswer | undefined {
  if (!hasOutput) return undefined;
  const timestamp = Math.trunc(atMs);
  if (!reply.ok) {
    return { deviceId, template, quality: 'bad', timestamp, requestId: reply.id ?? '', error: reply.error.code };
  }
  const data = typedData(reply.data);
  if (data === undefined) return undefined;
  const latencyMs = Math.max(0, Math.round(reply.timing.total_ms));
  return { deviceId, template, quality: 'good', data, timestamp, requestId: reply.id, model: reply.model, latencyMs };
}

/**
 * The reply's data as tag values. The output schema already checked it; this keeps only
 * what a tag can hold (a safe name, a boolean, finite number or string), in one pass.
 */
function typedData(data: Record<string, unknown> | undefined): TypedData | undefined {
  if (data === undefined) return undefined;
  const typed: Array<[string, TypedData[string]]> = [];
  for (const [name, value] of Object.entries(data)) {
    if (!FIELD_NAME_PATTERN.test(name)) continue;
    if (typeof value === 'boolean' || typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) typed.push([name, value]);
  }
  // fromEntries defines own properties, so a field named __proto__ stays a field.
  return typed.length > 0 ? Object.fromEntries(typed) : undefined;
}
