// CONFIG_FILE `templates`: prompts kept on the bridge, so a device only names one and fills
// its `{{vars}}`, and a plant engineer changes a prompt without reflashing devices (SIGHUP
// re-reads them). The schema only; rendering is intake's (bridge/intake/templates.ts).
import { z } from 'zod';
import { OutputSchema } from './output.js';
import { ChatMessageSchema, ChatRequestSchema, PRIORITIES, TEMPLATE_NAME_PATTERN } from '../../contract/index.js';

export const TemplateSchema = z.strictObject({
  /** Message contents (strings, or the `text` of content parts) may hold `{{var}}` placeholders. */
  messages: z.array(ChatMessageSchema).min(1),
  // Sent with the rendered request: checked exactly as a chat request's own.
  model: ChatRequestSchema.shape.model,
  max_tokens: ChatRequestSchema.shape.max_tokens,
  temperature: ChatRequestSchema.shape.temperature,
  response_format: ChatRequestSchema.shape.response_format,
  /** A raw camera image's `detail` in the upstream request (the image goes into the last user message). */
  image_detail: z.enum(['low', 'high', 'auto']).optional(),
  /** Priority class → model, for requests of that class (CONFIG_FILE `models` sends a model to its provider). */
  priority_route: z.partialRecord(z.enum(PRIORITIES), z.string().min(1).max(256)).optional(),
  /** The typed object every answer must be (JSON Schema subset): the answer's `data`, UNS and Sparkplug tags. */
  output: OutputSchema.optional(),
});
export type Template = z.infer<typeof TemplateSchema>;

const BAD_NAME = 'template names are 1 to 64 characters of A-Za-z0-9_.-';

export const TemplatesSchema = z
  .record(z.string().regex(TEMPLATE_NAME_PATTERN, BAD_NAME), TemplateSchema, {
    error: (issue) => (issue.code === 'invalid_key' ? BAD_NAME : undefined),
  })
  .default({});
