// A template's `output`: the JSON Schema (a draft 2020-12 subset) of the typed object its
// answers must be. The subset is what SCADA tags can hold: one flat object of boolean, number,
// integer and string properties. Checked at load; validation of answers is the results' part.
import { createRequire } from 'node:module';
import type { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { DEFAULT_STRING_MAX_LENGTH, FIELD_NAME_PATTERN, FIELD_TYPES, type FieldType } from '../../contract/index.js';

const MAX_PROPERTIES = 64;

const PropertySchema = z
  .strictObject({
    type: z.enum(FIELD_TYPES),
    description: z.string().max(1000).optional(),
    enum: z
      .array(z.union([z.string().max(256), z.number(), z.boolean()]))
      .min(1)
      .max(256)
      .optional(),
    minimum: z.number().optional(),
    maximum: z.number().optional(),
    maxLength: z.number().int().positive().max(65_536).optional(),
  })
  .superRefine((p, ctx) => {
    const numeric = p.type === 'number' || p.type === 'integer';
    if (!numeric && (p.minimum !== undefined || p.maximum !== undefined))
      ctx.addIssue({ code: 'custom', message: `minimum and maximum apply to number and integer, not ${p.type}` });
    if (p.type !== 'string' && p.maxLength !== undefined) ctx.addIssue({ code: 'custom', message: `maxLength applies to string, not ${p.type}` });
    if (p.minimum !== undefined && p.maximum !== undefined && p.minimum > p.maximum) ctx.addIssue({ code: 'custom', message: 'minimum is above maximum' });
    for (const value of p.enum ?? []) {
      if (!fits(p.type, value)) ctx.addIssue({ code: 'custom', path: ['enum'], message: `${JSON.stringify(value)} is not of type ${p.type}` });
    }
  });
export type OutputProperty = z.infer<typeof PropertySchema>;

export const OutputSchema = z
  .strictObject({
    $schema: z.string().max(256).optional(),
    title: z.string().max(256).optional(),
    description: z.string().max(1000).optional(),
    type: z.literal('object'),
    properties: z.record(
      z.string().regex(FIELD_NAME_PATTERN, 'property names are 1 to 64 characters of A-Za-z0-9_, not starting with a digit'),
      PropertySchema,
    ),
    required: z.array(z.string()).optional(),
    /** Always false in effect: an answer holds exactly the declared properties. */
    additionalProperties: z.literal(false).optional(),
  })
  .superRefine((s, ctx) => {
    const names = Object.keys(s.properties);
    if (names.length === 0 || names.length > MAX_PROPERTIES)
      ctx.addIssue({ code: 'custom', path: ['properties'], message: `must declare 1 to ${MAX_PROPERTIES} properties` });
    for (const [i, name] of (s.required ?? []).entries()) {
      if (!Object.hasOwn(s.properties, name)) ctx.addIssue({ code: 'custom', path: ['required', i], message: `"${name}" is not a declared property` });
    }
  });
export type Output = z.infer<typeof OutputSchema>;

/** One typed field of an output, as UNS and Sparkplug publish it. */
export interface OutputField {
  name: string;
  type: FieldType;
}

/** The output's fields in declaration order. */
export function outputFields(output: Output): OutputField[] {
  return Object.entries(output.properties).map(([name, p]) => ({ name, type: p.type }));
}

function fits(type: FieldType, value: string | number | boolean): boolean {
  if (type === 'string') return typeof value === 'string';
  if (type === 'boolean') return typeof value === 'boolean';
  if (type === 'integer') return Number.isInteger(value);
  return typeof value === 'number';
}

// --- the schema as sent and checked ----------------------------------------------------------

/** A JSON Schema as a plain object. */
export type JsonSchema = Record<string, unknown>;

/**
 * The schema an answer is asked for and checked against, in the form OpenAI's strict mode
 * takes: every property required, none other allowed. An optional property becomes nullable
 * (a null answer for it is dropped from `data`, as if absent); a string without maxLength gets
 * DEFAULT_STRING_MAX_LENGTH.
 */
export function outputJsonSchema(output: Output): JsonSchema {
  const required = new Set(output.required ?? []);
  const properties: Record<string, JsonSchema> = {};
  for (const [name, p] of Object.entries(output.properties)) {
    const optional = !required.has(name);
    const property: JsonSchema = { type: optional ? [p.type, 'null'] : p.type };
    if (p.description !== undefined) property['description'] = p.description;
    if (p.enum !== undefined) property['enum'] = optional ? [...p.enum, null] : p.enum;
    if (p.minimum !== undefined) property['minimum'] = p.minimum;
    if (p.maximum !== undefined) property['maximum'] = p.maximum;
    if (p.type === 'string') property['maxLength'] = p.maxLength ?? DEFAULT_STRING_MAX_LENGTH;
    properties[name] = property;
  }
  const schema: JsonSchema = { type: 'object', properties, required: Object.keys(properties), additionalProperties: false };
  if (output.description !== undefined) schema['description'] = output.description;
  return schema;
}

/** The options every output validator is compiled with: the first violation only, no logging. */
const AJV_OPTIONS = { allErrors: false, allowUnionTypes: true, logger: false } as const;

// Loaded with the first schema compiled (templates with `output`, a request's json_schema), not by every start.
let ajvModule: typeof import('ajv/dist/2020.js') | undefined;

/** A JSON Schema (draft 2020-12) compiler with the bridge's options. */
export function newAjv(): Ajv2020 {
  ajvModule ??= createRequire(import.meta.url)('ajv/dist/2020.js') as typeof import('ajv/dist/2020.js');
  return new ajvModule.Ajv2020(AJV_OPTIONS);
}

/** A template output problem, at its path in CONFIG_FILE. */
export interface OutputIssue {
  path: Array<string | number>;
  message: string;
}

/**
 * What the JSON Schema compiler (Ajv, draft 2020-12) says of each template's output, compiled
 * as answers are checked (with the author's $schema: a dialect it does not know is refused at
 * load, not at the first answer); and a template that sets both `output` and `response_format`.
 */
export function outputProblems(templates: Record<string, { output?: Output | undefined; response_format?: unknown }>): OutputIssue[] {
  const issues: OutputIssue[] = [];
  for (const [name, template] of Object.entries(templates)) {
    const { output } = template;
    if (output === undefined) continue;
    if (template.response_format !== undefined) {
      issues.push({ path: ['templates', name, 'response_format'], message: 'give output or response_format, not both: output sets the response format' });
    }
    try {
      const schema = outputJsonSchema(output);
      if (output.$schema !== undefined) schema['$schema'] = output.$schema;
      newAjv().compile(schema);
    } catch (err) {
      issues.push({ path: ['templates', name, 'output'], message: `the JSON Schema compiler refuses it: ${err instanceof Error ? err.message : String(err)}` });
    }
  }
  return issues;
}
