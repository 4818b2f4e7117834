// Reading the operator dashboard as its page does: JSON from /dashboard/api/… and the event
// stream, parsed into events.
import type { HistoryEvent, TickEvent } from '../../bridge/ops/dashboard/model.js';

export type DashboardEvent = { name: 'history'; data: HistoryEvent } | { name: 'tick'; data: TickEvent };

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a test reads whichever fields of the answer it asked for
export async function getJson(base: string, path: string, token?: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } });
  const text = await res.text();
  return { status: res.status, body: text.startsWith('{') ? JSON.parse(text) : text };
}

/**
 * The events of /dashboard/api/events until `done` says so (it sees every event so far), or
 * `timeoutMs`; then the stream is closed. Throws on a non-200 answer.
 */
export async function readEvents(
  base: string,
  done: (events: DashboardEvent[]) => boolean,
  options: { token?: string; timeoutMs?: number } = {},
): Promise<DashboardEvent[]> {
  const headers: Record<string, string> = options.token === undefined ? {} : { authorization: `Bearer ${options.token}` };
  const abort = new AbortController();
  const res = await fetch(`${base}/dashboard/api/events`, { headers, signal: abort.signal });
  if (res.status !== 200) throw new Error(`events answered ${res.status}`);
  const reader = res.body!.getReader();
  const timer = setTimeout(() => abort.abort(), options.timeoutMs ?? 10_000);
  const events: DashboardEvent[] = [];
  let buffer = '';
  try {
    while (!done(events)) {
      const { done: ended, value } = await reader.read();
      if (ended) break;
      buffer += Buffer.from(value).toString();
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const name = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (name && data) events.push({ name, data: JSON.parse(data) } as DashboardEvent);
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) throw err;
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return events;
}

export const ticks = (events: DashboardEvent[]): TickEvent[] => events.flatMap((e) => (e.name === 'tick' ? [e.data] : []));
