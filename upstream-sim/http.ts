// HTTP plumbing for the upstream simulator: a bounded request body, the caller's API key,
// JSON answers (each counted by status) and timers that close() can cancel.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PayloadTooLarge } from '../contract/index.js';
import { bump, type SimStats } from './stats.js';

// Big enough for camera frames as data URLs; bounded so a bad client cannot exhaust memory.
const MAX_BODY_BYTES = 32 * 1024 * 1024;

export interface ParsedBody {
  ok: boolean;
  value: unknown;
}

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new PayloadTooLarge());
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function parseJson(text: string): ParsedBody {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, value: null };
  }
}

export function bearerKey(req: IncomingMessage): string {
  const auth = req.headers.authorization;
  const match = typeof auth === 'string' ? /^Bearer\s+(.+)$/i.exec(auth.trim()) : null;
  return match?.[1]?.trim() ?? '';
}

export function keyLabel(req: IncomingMessage): string {
  const key = bearerKey(req);
  // Only a suffix, so stats output can be shared without leaking credentials.
  return key === '' ? 'none' : `…${key.slice(-4)}`;
}

function writeJson(res: ServerResponse, status: number, text: string, headers: Record<string, string>): void {
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    ...headers,
  });
  res.end(text);
}

/** Answers with `body` as JSON; counted even when the client has gone. */
export function send(stats: SimStats, res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  bump(stats.byStatus, String(status));
  if (res.destroyed || res.writableEnded) return;
  writeJson(res, status, JSON.stringify(body), headers);
}

/** Answers with `text` as it is, valid JSON or not. */
export function sendRaw(stats: SimStats, res: ServerResponse, status: number, text: string): void {
  bump(stats.byStatus, String(status));
  if (res.destroyed || res.writableEnded) return;
  writeJson(res, status, text, {});
}

/** Runs `fn` after `ms`, tracked in `timers` so close() can cancel what is still pending. */
export function later(timers: Set<NodeJS.Timeout>, ms: number, fn: () => void): void {
  const t = setTimeout(() => {
    timers.delete(t);
    fn();
  }, ms);
  timers.add(t);
}
