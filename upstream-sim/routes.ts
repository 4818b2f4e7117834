// Request routing for the upstream simulator: GET /stats, GET /v1/models (401 for a revoked
// key), and the two
// inference paths (read, record, check, then answer through fault handling); 405/404 otherwise.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PayloadTooLarge } from '../contract/index.js';
import { chatAnswer, checkChat } from './chat.js';
import { checkEmbeddings, embeddingsAnswer } from './embeddings.js';
import { answerWithFaults } from './faults.js';
import { streamRequest } from './stream.js';
import { bearerKey, keyLabel, parseJson, readBody, send, type ParsedBody } from './http.js';
import { DEFAULT_MODEL, EMBEDDING_MODEL, isRecord, openAiError } from './openai.js';
import type { RecordedRequest, SimState } from './state.js';
import { bump } from './stats.js';

interface InferenceRoute {
  /** Counted in stats.byModel when the body names none. */
  defaultModel: string;
  /** A 400 message for a JSON object this path cannot answer, else null. */
  check(body: Record<string, unknown>): string | null;
  answer(state: SimState, body: Record<string, unknown>): unknown;
}

const INFERENCE = new Map<string, InferenceRoute>([
  [
    '/v1/chat/completions',
    { defaultModel: DEFAULT_MODEL, check: checkChat, answer: (state, body) => chatAnswer(body, ++state.completionSeq, state.settings.answerBytes) },
  ],
  ['/v1/embeddings', { defaultModel: EMBEDDING_MODEL, check: checkEmbeddings, answer: (_state, body) => embeddingsAnswer(body) }],
]);

export function handleRequest(state: SimState, req: IncomingMessage, res: ServerResponse): void {
  const path = new URL(req.url ?? '/', 'http://sim').pathname;
  const method = req.method ?? 'GET';
  if (path === '/stats' && method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(state.stats));
    return;
  }
  state.stats.total += 1;
  bump(state.stats.byPath, path);
  bump(state.stats.byKey, keyLabel(req));

  const route = INFERENCE.get(path);
  if (route !== undefined && method === 'POST') {
    handleInference(state, req, res, path, route).catch((err: unknown) => {
      send(state.stats, res, 500, openAiError(`upstream-sim bug: ${String(err)}`, 'server_error'));
    });
    return;
  }
  if (path === '/v1/models' && method === 'GET') {
    const key = bearerKey(req);
    if (key !== '' && state.settings.revokedKeys.includes(key)) {
      send(state.stats, res, 401, openAiError('Incorrect API key provided (upstream-sim)', 'invalid_request_error', 'invalid_api_key'));
      return;
    }
    const model = (id: string): unknown => ({ id, object: 'model', created: 1_700_000_000, owned_by: 'upstream-sim' });
    send(state.stats, res, 200, { object: 'list', data: [model(DEFAULT_MODEL), model(EMBEDDING_MODEL)] });
    return;
  }
  req.resume();
  if (route !== undefined || path === '/v1/models') {
    send(state.stats, res, 405, openAiError(`method ${method} not allowed on ${path}`, 'invalid_request_error'), {
      allow: route !== undefined ? 'POST' : 'GET',
    });
    return;
  }
  send(state.stats, res, 404, openAiError(`unknown path ${path}`, 'invalid_request_error', 'unknown_url'));
}

async function handleInference(state: SimState, req: IncomingMessage, res: ServerResponse, path: string, route: InferenceRoute): Promise<void> {
  let text: string;
  try {
    text = await readBody(req);
  } catch (err) {
    if (err instanceof PayloadTooLarge) {
      send(state.stats, res, 413, openAiError('request body too large', 'invalid_request_error'), { connection: 'close' });
    }
    return;
  }
  const parsed = parseJson(text);
  record(state, req, res, path, parsed.value);
  const model = isRecord(parsed.value) && typeof parsed.value.model === 'string' ? parsed.value.model : null;
  bump(state.stats.byModel, model ?? route.defaultModel);

  const invalid = checkBody(parsed, route);
  if (invalid !== null) {
    send(state.stats, res, 400, openAiError(invalid, 'invalid_request_error'));
    return;
  }
  const body = parsed.value as Record<string, unknown>;
  const stream = path === '/v1/chat/completions' ? streamRequest(body) : undefined;
  answerWithFaults(state, res, bearerKey(req), model ?? route.defaultModel, () => route.answer(state, body), stream);
}

/** Adds the call to `state.requests`, stamped when its answer is handed to the socket. */
function record(state: SimState, req: IncomingMessage, res: ServerResponse, path: string, body: unknown): void {
  const entry: RecordedRequest = { path, headers: { ...req.headers }, body, at: Date.now() };
  state.requests.push(entry);
  res.once('finish', () => {
    entry.answeredAt = Date.now();
  });
  for (const arrived of state.arrivals) arrived();
}

/** The 400 message for a body that is not JSON or that the path cannot answer, else null. */
function checkBody(parsed: ParsedBody, route: InferenceRoute): string | null {
  if (!parsed.ok) return 'We could not parse the JSON body of your request.';
  const body = parsed.value;
  if (!isRecord(body)) return 'request body must be a JSON object';
  if (body.model !== undefined && typeof body.model !== 'string') return "'model' must be a string";
  return route.check(body);
}
