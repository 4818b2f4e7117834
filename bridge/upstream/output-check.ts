// Typed answers: the schema a chat request's answer must match (a template's `output`, or the
// request's own `response_format` json_schema), compiled once, and the check of an answer's
// text against it. A template's schema is compiled when the templates are loaded; a device's
// schema is untrusted, so only one inside a small safe subset is compiled (no pattern, format
// or $ref: nothing whose checking time is not linear in the answer), and the compiled ones are
// kept in a cache bounded in entries.
import { createHash } from 'node:crypto';
import type { Ajv2020, ValidateFunction } from 'ajv/dist/2020.js';
import { jsonNestingProblem } from '../../contract/json-depth.js';
import type { InferRequest } from '../../contract/index.js';
import { newAjv, type JsonSchema } from '../config/output.js';
import { describeViolation } from './output-violation.js';

/** Compiled template schemas kept (every template of several reloads). */
const TEMPLATE_ENTRIES = 1024;
/** Compiled device schemas kept; the least recently used goes first. */
const DEVICE_ENTRIES = 256;
/** An answer longer than this is not parsed (max_tokens bounds it well below). */
const MAX_ANSWER_CHARS = 1_048_576;
/** What the error reply (and so the dead letter) keeps of an invalid answer. */
export const RAW_KEPT_CHARS = 4096;

/** How a template's output is asked of a provider. */
export interface OutputFormat {
  /** The json_schema `name`. */
  name: string;
  /** Sent in strict mode (what the bridge alone checks, such as maxLength, left out). */
  schema: JsonSchema;
  /** For a provider without structured outputs: a system message asking for the object. */
  instruction: string;
}

export type OutputVerdict = { ok: true; data: Record<string, unknown> } | { ok: false; violation: string; raw: string };

/** One compiled schema. */
export class OutputCheck {
  constructor(
    private readonly validate: ValidateFunction,
    /** Set for a template's schema: how each provider is asked for it. */
    readonly format: OutputFormat | undefined,
  ) {}

  /** Whether `content` (the answer's text) is a JSON object matching the schema, and its data. */
  check(content: string | null): OutputVerdict {
    if (content === null) return { ok: false, violation: 'the answer has no text', raw: '' };
    const raw = keptText(content);
    if (content.length > MAX_ANSWER_CHARS) return { ok: false, violation: `the answer is over ${MAX_ANSWER_CHARS} characters`, raw };
    const deep = jsonNestingProblem(Buffer.from(content));
    if (deep !== undefined) return { ok: false, violation: `the answer is not usable JSON: ${deep}`, raw };
    let data: unknown;
    try {
      data = JSON.parse(stripFence(content));
    } catch {
      return { ok: false, violation: 'the answer is not JSON', raw };
    }
    if (typeof data !== 'object' || data === null || Array.isArray(data)) return { ok: false, violation: 'the answer is not a JSON object', raw };
    if (!this.validate(data)) {
      const [first] = this.validate.errors ?? [];
      return { ok: false, violation: first ? describeViolation(first, data) : 'the answer does not match the schema', raw };
    }
    return { ok: true, data: this.format ? withoutNulls(data as Record<string, unknown>) : (data as Record<string, unknown>) };
  }
}

/** The first RAW_KEPT_CHARS of a text, never half a surrogate pair. */
export function keptText(text: string): string {
  if (text.length <= RAW_KEPT_CHARS) return text;
  const cut = text.charCodeAt(RAW_KEPT_CHARS - 1) >= 0xd800 && text.charCodeAt(RAW_KEPT_CHARS - 1) < 0xdc00 ? RAW_KEPT_CHARS - 1 : RAW_KEPT_CHARS;
  return text.slice(0, cut);
}

/** A JSON-mode model may still wrap its object in a Markdown code fence. */
function stripFence(text: string): string {
  const trimmed = text.trim();
  const fenced = /^```(?:json)?\s*\n([\s\S]*)\n```$/.exec(trimmed);
  return fenced ? (fenced[1] as string) : trimmed;
}

/** A template's optional fields come back null when absent (strict mode): absent in `data`. */
function withoutNulls(data: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(data)) if (value !== null) kept[name] = value;
  return kept;
}

/** A Map used as a least-recently-used cache of at most `max` entries; `evicted` sees each one dropped. */
class Lru<V> {
  private readonly map = new Map<string, V>();
  constructor(
    private readonly max: number,
    private readonly evicted: (value: V) => void = () => undefined,
  ) {}

  get(key: string): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    while (this.map.size > this.max) {
      const [oldest, old] = this.map.entries().next().value as [string, V];
      this.map.delete(oldest);
      this.evicted(old);
    }
  }

  get size(): number {
    return this.map.size;
  }
}

const hashOf = (schema: unknown): string => createHash('sha256').update(JSON.stringify(schema)).digest('base64url');

/** Compiled schemas by their hash: templates' (registered at load) and devices' (on first use). */
export class OutputChecks {
  private compiler: Ajv2020 | undefined;
  private readonly templates: Lru<OutputCheck>;
  /** A device schema outside the safe subset is remembered as `false`, so it is not looked at again. */
  private readonly devices: Lru<{ check: OutputCheck | false; schema: JsonSchema }>;
  /** A template's schema object, as its rendered requests carry it in this process: found without hashing. */
  private readonly bySchema = new WeakMap<object, OutputCheck>();

  constructor(deviceEntries = DEVICE_ENTRIES, templateEntries = TEMPLATE_ENTRIES) {
    // Ajv keeps every compiled schema until told to forget it.
    this.templates = new Lru(templateEntries);
    this.devices = new Lru(deviceEntries, ({ schema, check }) => {
      if (check !== false) this.ajv.removeSchema(schema);
    });
  }

  /** A template's schema (outputJsonSchema), compiled now; answers of requests carrying it are checked and typed. */
  registerTemplate(schema: JsonSchema, format: OutputFormat): void {
    const key = hashOf(schema);
    const known = this.templates.get(key);
    const check = known ?? new OutputCheck(this.ajv.compile(schema), format);
    if (known === undefined) this.templates.set(key, check);
    this.bySchema.set(schema, check);
  }

  /** The check for a request's answers: its json_schema, when it has one the bridge checks; else undefined. */
  forRequest(request: InferRequest): OutputCheck | undefined {
    if (!('messages' in request)) return undefined;
    const format = request.response_format;
    if (format?.type !== 'json_schema') return undefined;
    const schema = format.json_schema?.schema;
    if (schema === undefined) return undefined;
    const same = typeof schema === 'object' && schema !== null ? this.bySchema.get(schema) : undefined;
    if (same !== undefined) return same;
    const key = hashOf(schema);
    const template = this.templates.get(key);
    if (template) return template;
    const known = this.devices.get(key);
    if (known) return known.check === false ? undefined : known.check;
    const check = safeSchema(schema) ? this.compiled(schema) : false;
    this.devices.set(key, { check, schema });
    return check === false ? undefined : check;
  }

  /** Made with the first schema: most starts compile none. */
  private get ajv(): Ajv2020 {
    return (this.compiler ??= newAjv());
  }

  /** How many device schemas are kept (compiled or refused). */
  get deviceEntries(): number {
    return this.devices.size;
  }

  private compiled(schema: JsonSchema): OutputCheck | false {
    try {
      return new OutputCheck(this.ajv.compile(schema), undefined);
    } catch {
      return false;
    }
  }
}

/** The one registry of the process: templates register into it, the scheduler checks answers with it. */
export const outputChecks = new OutputChecks();

// --- the safe subset of a device's schema -----------------------------------------------------

const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
const ALL_TYPES = new Set([...SCALAR_TYPES, 'object', 'array']);
const NUMBER_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'];
const COUNT_KEYWORDS = ['minLength', 'maxLength', 'minItems', 'maxItems'];
const TEXT_KEYWORDS = ['title', 'description'];
const KNOWN = new Set(['type', 'properties', 'required', 'additionalProperties', 'items', 'enum', ...NUMBER_KEYWORDS, ...COUNT_KEYWORDS, ...TEXT_KEYWORDS]);
/** Objects and arrays inside one another, the answer itself included. */
export const SAFE_MAX_DEPTH = 4;
/** Schema nodes (the answer object, each property, each array's items) in all. */
export const SAFE_MAX_NODES = 256;
const MAX_ENUM = 256;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/**
 * Whether a device's schema is inside the safe subset: an object at the top; objects, arrays,
 * strings, numbers, integers, booleans and null, nested at most SAFE_MAX_DEPTH deep and
 * SAFE_MAX_NODES nodes in all; only type, properties, required, additionalProperties (a
 * boolean), items, enum (scalars), minimum/maximum and their exclusive forms,
 * minLength/maxLength, minItems/maxItems, title and description. Everything else ($ref,
 * pattern, format, anyOf…) leaves the schema to the upstream alone.
 */
export function safeSchema(schema: unknown): boolean {
  if (!isRecord(schema) || schema['type'] !== 'object') return false;
  const budget = { nodes: SAFE_MAX_NODES };
  return safeNode(schema, 1, budget);
}

function safeNode(node: unknown, depth: number, budget: { nodes: number }): boolean {
  budget.nodes -= 1;
  if (budget.nodes < 0 || !isRecord(node)) return false;
  for (const [key, value] of Object.entries(node)) if (!KNOWN.has(key) || !safeKeyword(key, value)) return false;
  const types = [node['type']].flat();
  if (types.length === 0 || !types.every((t) => typeof t === 'string' && ALL_TYPES.has(t))) return false;
  const nested = types.includes('object') || types.includes('array');
  if (nested && depth > SAFE_MAX_DEPTH) return false;
  if (isRecord(node['properties']) && !Object.values(node['properties']).every((p) => safeNode(p, depth + 1, budget))) return false;
  if (node['items'] !== undefined && !safeNode(node['items'], depth + 1, budget)) return false;
  return true;
}

function safeKeyword(key: string, value: unknown): boolean {
  if (key === 'type') return typeof value === 'string' || (Array.isArray(value) && value.length <= ALL_TYPES.size);
  if (key === 'properties') return isRecord(value);
  if (key === 'required') return Array.isArray(value) && value.every((v) => typeof v === 'string');
  if (key === 'additionalProperties') return typeof value === 'boolean';
  if (key === 'items') return isRecord(value);
  if (key === 'enum') return Array.isArray(value) && value.length > 0 && value.length <= MAX_ENUM && value.every((v) => v === null || typeof v !== 'object');
  if (NUMBER_KEYWORDS.includes(key)) return typeof value === 'number' && Number.isFinite(value);
  if (COUNT_KEYWORDS.includes(key)) return isCount(value);
  return typeof value === 'string';
}
