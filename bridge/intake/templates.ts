// A template request rendered into the chat request it stands for: the template's messages
// with every `{{var}}` replaced by the device's value as plain text (no template logic, nothing
// evaluated), and its model and parameters. Refusals name their cause: an unknown template, a
// var the template needs and the request lacks, a var the template does not use.
import { BridgeError, VAR_NAME_PATTERN, type ChatMessage, type ChatRequest, type Priority, type TemplateRequest } from '../../contract/index.js';
import { outputJsonSchema, type JsonSchema } from '../config/output.js';
import type { Template } from '../config/templates.js';
import { imageRef, type JobImage } from '../model/job.js';
import { outputChecks, type OutputFormat } from '../upstream/output-check.js';

/** `{{name}}` or `{{ name }}`, the name as a request's vars may spell it. */
const PLACEHOLDER = new RegExp(`\\{\\{\\s*(${VAR_NAME_PATTERN.source.slice(1, -1)})\\s*\\}\\}`, 'g');

interface Prepared {
  template: Template;
  /** Every var its messages hold, each needed. */
  vars: ReadonlySet<string>;
  /** The template's `output` as the request's response format: its answers are checked and typed. */
  responseFormat?: { type: 'json_schema'; json_schema: { name: string; strict: true; schema: JsonSchema } };
}

export class Templates {
  private prepared = new Map<string, Prepared>();

  constructor(templates: Record<string, Template> = {}) {
    this.replace(templates);
  }

  /** The templates requests are rendered with from now on (SIGHUP). */
  replace(templates: Record<string, Template>): void {
    const prepared = new Map<string, Prepared>();
    for (const [name, template] of Object.entries(templates)) prepared.set(name, prepare(name, template));
    this.prepared = prepared;
  }

  names(): string[] {
    return [...this.prepared.keys()];
  }

  /** The template's `output` schema, if it declares one (only those answers become SCADA tags). */
  output(name: string): Template['output'] {
    return this.prepared.get(name)?.template.output;
  }

  /** The chat request `request` stands for, for a request of `priority`; BridgeError invalid_request when it cannot be. */
  render(request: TemplateRequest, priority: Priority, image?: JobImage): ChatRequest {
    const found = this.prepared.get(request.template);
    if (!found) throw new BridgeError('invalid_request', `unknown template "${request.template}"`);
    const { template, vars, responseFormat } = found;
    for (const name of vars) if (!Object.hasOwn(request.vars, name)) throw new BridgeError('invalid_request', `missing var "${name}"`);
    for (const name of Object.keys(request.vars)) if (!vars.has(name)) throw new BridgeError('invalid_request', `unknown var "${name}"`);
    const messages = template.messages.map((m) => rendered(m, request.vars));
    const chat: ChatRequest = { id: request.id, messages: image ? withImage(messages, imageRef(image.sha256), template.image_detail ?? 'low') : messages };
    const model = request.model ?? template.priority_route?.[priority] ?? template.model;
    if (model !== undefined) chat.model = model;
    if (template.max_tokens !== undefined) chat.max_tokens = template.max_tokens;
    if (template.temperature !== undefined) chat.temperature = template.temperature;
    if (template.response_format !== undefined) chat.response_format = template.response_format;
    if (responseFormat !== undefined) chat.response_format = responseFormat;
    if (request.lock !== undefined) chat.lock = request.lock;
    if (request.ttl_ms !== undefined) chat.ttl_ms = request.ttl_ms;
    if (request.cache !== undefined) chat.cache = request.cache;
    if (request.stream !== undefined) chat.stream = request.stream;
    return chat;
  }
}

/** A template ready to render; its output compiled (the registry keeps it for checking answers). */
function prepare(name: string, template: Template): Prepared {
  const prepared: Prepared = { template, vars: varsOf(template) };
  if (template.output === undefined) return prepared;
  const schema = outputJsonSchema(template.output);
  const format = outputFormat(name, schema);
  outputChecks.registerTemplate(schema, format);
  prepared.responseFormat = { type: 'json_schema', json_schema: { name: format.name, strict: true, schema } };
  return prepared;
}

/**
 * How the output is asked of a provider: in strict mode with maxLength said in the description
 * (strict mode does not take the keyword; the bridge checks it), or as a system message for a
 * provider without structured outputs.
 */
export function outputFormat(templateName: string, schema: JsonSchema): OutputFormat {
  const properties = Object.fromEntries(
    Object.entries(schema['properties'] as Record<string, JsonSchema>).map(([field, { maxLength, ...rest }]) => {
      if (typeof maxLength !== 'number') return [field, rest];
      const said = typeof rest['description'] === 'string' ? `${rest['description']} ` : '';
      return [field, { ...rest, description: `${said}(at most ${maxLength} characters)` }];
    }),
  );
  const sent = { ...schema, properties };
  return {
    name: templateName.replace(/[^A-Za-z0-9_-]/g, '_'),
    schema: sent,
    instruction: `Answer with one JSON object and nothing else: no prose, no code fence. It must match this JSON Schema: ${JSON.stringify(schema)}`,
  };
}

/** The texts of a message: its string content, or the `text` of its text parts. */
function textsOf(message: ChatMessage): string[] {
  const { content } = message;
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) return [];
  return content.flatMap((part) => (part.type === 'text' && typeof part['text'] === 'string' ? [part['text']] : []));
}

function varsOf(template: Template): Set<string> {
  const vars = new Set<string>();
  for (const message of template.messages) {
    for (const text of textsOf(message)) for (const match of text.matchAll(PLACEHOLDER)) vars.add(match[1] as string);
  }
  return vars;
}

function filled(text: string, vars: Record<string, string | number>): string {
  return text.replace(PLACEHOLDER, (_, name: string) => String(vars[name]));
}

function rendered(message: ChatMessage, vars: Record<string, string | number>): ChatMessage {
  const { content } = message;
  if (typeof content === 'string') return { ...message, content: filled(content, vars) };
  if (!Array.isArray(content)) return message;
  const parts = content.map((part) => (part.type === 'text' && typeof part['text'] === 'string' ? { ...part, text: filled(part['text'], vars) } : part));
  return { ...message, content: parts };
}

/** The image as one more part of the last user message (or of a new one, if there is none). */
function withImage(messages: ChatMessage[], url: string, detail: string): ChatMessage[] {
  const part = { type: 'image_url', image_url: { url, detail } };
  let last = messages.length - 1;
  while (last >= 0 && messages[last]?.role !== 'user') last -= 1;
  if (last < 0) return [...messages, { role: 'user', content: [part] }];
  const { content } = messages[last] as ChatMessage;
  const parts = typeof content === 'string' ? [{ type: 'text', text: content }, part] : [...(content ?? []), part];
  return messages.map((m, i) => (i === last ? { ...m, content: parts } : m));
}
