// A model gateway in front of the upstream simulator, refusing what a real one refuses: a
// model it does not serve (404), a model the key may not use (403), a `max_tokens` beyond
// the model's (400). Everything else goes through to the simulator. Without it, the requests
// a device can make the upstream refuse (and what the bridge then does with them) would
// never be exercised: the simulator answers every model.
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

export const SERVED_MODELS = ['sim-model', 'sim-embedding', 'text-embedding-3-small'];
const MAX_COMPLETION_TOKENS = 4096;
const MAX_BODY_BYTES = 8 * 2 ** 20;

export interface Gateway {
  url: string;
  refused: Record<string, number>;
  close(): Promise<void>;
}

function refusal(body: unknown): { status: number; message: string; code: string } | null {
  if (typeof body !== 'object' || body === null) return null;
  const { model, max_tokens: maxTokens, max_completion_tokens: maxCompletion } = body as Record<string, unknown>;
  if (typeof model === 'string' && model.startsWith('gpt-4')) return { status: 403, message: `this key may not use model ${model}`, code: 'model_not_allowed' };
  if (typeof model === 'string' && !SERVED_MODELS.includes(model))
    return { status: 404, message: `The model \`${model.slice(0, 100)}\` does not exist`, code: 'model_not_found' };
  for (const value of [maxTokens, maxCompletion]) {
    if (typeof value === 'number' && value > MAX_COMPLETION_TOKENS) {
      return {
        status: 400,
        message: `max_tokens is too large: ${value}. This model supports at most ${MAX_COMPLETION_TOKENS} completion tokens`,
        code: 'invalid_value',
      };
    }
  }
  return null;
}

async function readBody(req: IncomingMessage): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return null;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export async function startGateway(upstreamPort: number): Promise<Gateway> {
  const refused: Record<string, number> = {};
  const answer = (res: ServerResponse, status: number, message: string, code: string): void => {
    refused[String(status)] = (refused[String(status)] ?? 0) + 1;
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message, type: 'invalid_request_error', code } }));
  };
  const server = createServer((req, res) => {
    void readBody(req).then(
      (body) => {
        if (body === null) return answer(res, 413, 'request too large', 'request_too_large');
        let parsed: unknown = null;
        try {
          parsed = JSON.parse(body.toString());
        } catch {
          // the simulator answers a body that is not JSON itself
        }
        const refuse = refusal(parsed);
        if (refuse !== null) return answer(res, refuse.status, refuse.message, refuse.code);
        const forward = request({ host: '127.0.0.1', port: upstreamPort, path: req.url, method: req.method, headers: req.headers }, (upstream) => {
          res.writeHead(upstream.statusCode ?? 502, upstream.headers);
          upstream.pipe(res);
        });
        forward.on('error', () => res.destroy());
        res.on('close', () => forward.destroy());
        forward.end(body);
      },
      () => res.destroy(),
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
