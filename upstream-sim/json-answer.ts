// The simulator's answers in JSON mode: an object that satisfies the request's schema (its
// json_schema response format, or the schema a system message quotes for json_object), so a
// template with `output` works against the simulator; and, when the prompt says
// `sim:off-schema=N`, the first N answers of the conversation break it on purpose.
import { isRecord } from './openai.js';

/** In a prompt: answer off-schema while the conversation holds fewer than N assistant answers. */
const OFF_SCHEMA = /sim:off-schema=(\d{1,2})/;
/** Where a system message quotes the schema of a json_object request. */
const QUOTED_SCHEMA = 'JSON Schema: ';

/** The schema the request asks its answer to match, if it names one. */
export function requestedSchema(body: Record<string, unknown>, messages: unknown[]): Record<string, unknown> | undefined {
  const format = body.response_format;
  if (!isRecord(format)) return undefined;
  if (format.type === 'json_schema' && isRecord(format.json_schema) && isRecord(format.json_schema.schema)) return format.json_schema.schema;
  if (format.type !== 'json_object') return undefined;
  for (const m of messages) {
    if (!isRecord(m) || m.role !== 'system' || typeof m.content !== 'string') continue;
    const at = m.content.indexOf(QUOTED_SCHEMA);
    if (at < 0) continue;
    try {
      const schema: unknown = JSON.parse(m.content.slice(at + QUOTED_SCHEMA.length));
      if (isRecord(schema)) return schema;
    } catch {
      // not a schema after all
    }
  }
  return undefined;
}

/** Whether this answer should break the schema: the prompt's marker, counted against earlier answers. */
export function offSchema(messages: unknown[], texts: string[]): boolean {
  const marker = texts.map((t) => OFF_SCHEMA.exec(t)).find((m) => m !== null);
  if (!marker) return false;
  const answered = messages.filter((m) => isRecord(m) && m.role === 'assistant').length;
  return answered < Number(marker[1]);
}

/** A value that satisfies `schema` (values from enum, within minimum/maximum, strings from `text` cut to maxLength). */
export function sampleOf(schema: unknown, text = 'sim', depth = 0): unknown {
  if (!isRecord(schema) || depth > 16) return null;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum.find((v) => v !== null) ?? null;
  const type = [schema.type].flat().find((t) => t !== 'null') ?? (schema.type === 'null' ? 'null' : 'object');
  switch (type) {
    case 'object': {
      const properties = isRecord(schema.properties) ? schema.properties : {};
      return Object.fromEntries(Object.entries(properties).map(([name, p]) => [name, sampleOf(p, text, depth + 1)]));
    }
    case 'array': {
      const min = typeof schema.minItems === 'number' ? schema.minItems : 1;
      const count = Math.min(min, typeof schema.maxItems === 'number' ? schema.maxItems : min, 16);
      return Array.from({ length: count }, () => sampleOf(schema.items, text, depth + 1));
    }
    case 'string': {
      const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
      const max = typeof schema.maxLength === 'number' ? schema.maxLength : (saidMaxLength(schema.description) ?? text.length);
      return text.padEnd(Math.min(min, 4096), 'x').slice(0, max);
    }
    case 'number':
    case 'integer':
      return numberIn(schema, type === 'integer');
    case 'boolean':
      return true;
    default:
      return null;
  }
}

function numberIn(schema: Record<string, unknown>, integer: boolean): number {
  const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);
  const low = num(schema.minimum) ?? (num(schema.exclusiveMinimum) === undefined ? undefined : (num(schema.exclusiveMinimum) as number) + 1);
  const high = num(schema.maximum) ?? (num(schema.exclusiveMaximum) === undefined ? undefined : (num(schema.exclusiveMaximum) as number) - 1);
  let value = low !== undefined && high !== undefined ? (low + high) / 2 : (low ?? high ?? 0.31);
  if (integer) value = low !== undefined ? Math.ceil(value) : Math.floor(value);
  return Math.round(value * 100) / 100;
}

/** A sample that breaks `schema` in its first property: above its maximum, else the wrong type. */
export function offSchemaSample(schema: Record<string, unknown>, text: string): unknown {
  const sample = sampleOf(schema, text);
  const properties = isRecord(schema.properties) ? schema.properties : {};
  const [name, property] = Object.entries(properties)[0] ?? [];
  if (!isRecord(sample) || name === undefined || !isRecord(property)) return 'off-schema';
  const types = [property.type].flat();
  if (typeof property.maximum === 'number') sample[name] = property.maximum + (types.includes('integer') ? 2 : 2.2);
  else if (types.includes('string')) sample[name] = 12345;
  else sample[name] = 'off-schema';
  return sample;
}

/** A length limit a description states, `(at most 12 characters)`, as the bridge says it in strict mode. */
function saidMaxLength(description: unknown): number | undefined {
  const said = typeof description === 'string' ? /at most (\d{1,6}) characters/.exec(description) : null;
  return said ? Number(said[1]) : undefined;
}
