// The first way a model's answer breaks its schema, in words an operator (and the model, asked
// again) can act on: `field "burr_mm": 7.2 is above maximum 5`.
import type { ErrorObject } from 'ajv/dist/2020.js';

const MAX_VALUE_CHARS = 40;

/** A value as a violation quotes it: JSON, cut short. */
function shown(value: unknown): string {
  const json = JSON.stringify(value) ?? String(value);
  return json.length > MAX_VALUE_CHARS ? `${json.slice(0, MAX_VALUE_CHARS)}…` : json;
}

/** The path segments of a JSON Pointer (`/a/0/b~1c` → a, 0, b/c). */
function segments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** The value at `path` in `data`, or undefined. */
function valueAt(data: unknown, path: string[]): unknown {
  let value = data;
  for (const segment of path) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, segment)) return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

const fieldName = (path: string[]): string => `field "${path.join('.')}"`;

/** Ajv's first error as one sentence about the answer `data`. */
export function describeViolation(error: ErrorObject, data: unknown): string {
  const path = segments(error.instancePath);
  const params = error.params as Record<string, unknown>;
  const value = shown(valueAt(data, path));
  const at = path.length === 0 ? 'the answer' : fieldName(path);
  switch (error.keyword) {
    case 'required':
      return `${fieldName([...path, String(params['missingProperty'])])} is missing`;
    case 'additionalProperties':
      return `${fieldName([...path, String(params['additionalProperty'])])} is not declared`;
    case 'type':
      return `${at}: ${value} is not of type ${[params['type']].flat().join(' or ')}`;
    case 'enum':
      return `${at}: ${value} is not one of ${((params['allowedValues'] as unknown[] | undefined) ?? []).map(shown).join(', ')}`;
    case 'const':
      return `${at}: ${value} is not ${shown(params['allowedValue'])}`;
    case 'maximum':
      return `${at}: ${value} is above maximum ${String(params['limit'])}`;
    case 'minimum':
      return `${at}: ${value} is below minimum ${String(params['limit'])}`;
    case 'exclusiveMaximum':
      return `${at}: ${value} is not below ${String(params['limit'])}`;
    case 'exclusiveMinimum':
      return `${at}: ${value} is not above ${String(params['limit'])}`;
    case 'maxLength':
      return `${at} is longer than ${String(params['limit'])} characters`;
    case 'minLength':
      return `${at} is shorter than ${String(params['limit'])} characters`;
    case 'maxItems':
      return `${at} has more than ${String(params['limit'])} items`;
    case 'minItems':
      return `${at} has fewer than ${String(params['limit'])} items`;
    default:
      return `${at} ${error.message ?? `breaks ${error.keyword}`}`;
  }
}
