// @ts-check
// Server-sent events over fetch() (EventSource cannot send an Authorization header): a line
// parser after the WHATWG rules and a stream that reconnects after a pause.

/**
 * Returns feed(textChunk); calls onEvent(name, data) for each complete event.
 * @param {(name: string, data: string) => void} onEvent
 * @returns {(chunk: string) => void}
 */
export function createSseParser(onEvent) {
  let buffer = '';
  let skipLeadingLf = false;
  let name = '';
  /** @type {string[]} */
  let data = [];

  const dispatch = () => {
    if (data.length > 0) onEvent(name || 'message', data.join('\n'));
    name = '';
    data = [];
  };

  /** @param {string} text */
  const line = (text) => {
    if (text === '') return dispatch();
    if (text.startsWith(':')) return; // comment / heartbeat
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') name = value;
    else if (field === 'data') data.push(value);
  };

  return function feed(chunk) {
    let text = chunk;
    if (skipLeadingLf && text.startsWith('\n')) text = text.slice(1);
    skipLeadingLf = false;
    const from = buffer.length; // the buffer holds no line end: scan only the new text
    buffer += text;
    let start = 0;
    for (let i = from; i < buffer.length; i++) {
      const c = buffer[i];
      if (c !== '\n' && c !== '\r') continue;
      line(buffer.slice(start, i));
      if (c === '\r') {
        if (i + 1 === buffer.length)
          skipLeadingLf = true; // a CRLF may be split across chunks
        else if (buffer[i + 1] === '\n') i++;
      }
      start = i + 1;
    }
    buffer = buffer.slice(start);
  };
}

/**
 * @typedef {object} StreamState
 * @property {'connecting' | 'open' | 'retrying' | 'unauthorized' | 'stopped'} kind
 * @property {unknown} [detail] why it retries, or the refusal's HTTP status
 */

/**
 * @typedef {object} StreamOptions
 * @property {string} url
 * @property {(extra: Record<string, string>) => Record<string, string>} headers fresh on each connect
 * @property {(name: string, data: string) => void} onEvent
 * @property {(state: StreamState) => void} onState
 * @property {number} [retryMs]
 * @property {() => number} [idleMs] no byte for that long: reconnect
 */

/**
 * Keeps a stream open. options: url, headers() (fresh on each connect), onEvent(name, data),
 * onState({kind: 'connecting'|'open'|'retrying'|'unauthorized'|'stopped', detail}),
 * retryMs, idleMs() (no byte for that long: reconnect). Returns {restart(), stop()}.
 * @param {StreamOptions} options
 */
export function openStream(options) {
  let generation = 0;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retryTimer;
  /** @type {AbortController | null} */
  let current = null;

  const stop = () => {
    generation++;
    clearTimeout(retryTimer);
    current?.abort();
    current = null;
  };

  /** @param {number} gen */
  const connect = async (gen) => {
    const controller = new AbortController();
    current = controller;
    options.onState({ kind: 'connecting' });
    const onOpen = () => gen === generation && options.onState({ kind: 'open' });
    /** @type {StreamState} */
    const outcome = await runOnce(options, controller, onOpen).catch((err) => ({ kind: 'retrying', detail: reason(err) }));
    if (gen !== generation) return; // stopped or restarted meanwhile
    options.onState(outcome);
    if (outcome.kind === 'retrying') retryTimer = setTimeout(() => connect(gen), options.retryMs ?? 2000);
  };

  return {
    restart() {
      stop();
      connect(generation);
    },
    stop() {
      stop();
      options.onState({ kind: 'stopped' });
    },
  };
}

/**
 * @param {StreamOptions} options
 * @param {AbortController} controller
 * @param {() => void} onOpen
 * @returns {Promise<StreamState>}
 */
async function runOnce(options, controller, onOpen) {
  const res = await fetch(options.url, {
    headers: options.headers({ Accept: 'text/event-stream' }),
    signal: controller.signal,
    cache: 'no-store',
  });
  if (res.status === 401 || res.status === 403) return { kind: 'unauthorized', detail: res.status };
  if (!res.ok || !res.body) return { kind: 'retrying', detail: `HTTP ${res.status}` };
  onOpen();
  await pump(res.body.getReader(), options, controller);
  return { kind: 'retrying', detail: 'stream ended' };
}

/**
 * @param {ReadableStreamDefaultReader<Uint8Array>} reader
 * @param {StreamOptions} options
 * @param {AbortController} controller
 */
async function pump(reader, options, controller) {
  const decoder = new TextDecoder();
  const feed = createSseParser((name, data) => safely(() => options.onEvent(name, data)));
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let idleTimer;
  const kick = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => controller.abort(), options.idleMs?.() ?? 30_000);
  };
  try {
    kick();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      kick();
      feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    clearTimeout(idleTimer);
  }
}

/** @param {() => void} fn */
function safely(fn) {
  try {
    fn();
  } catch (err) {
    console.error('dashboard: event handler failed', err);
  }
}

/** @param {unknown} err */
function reason(err) {
  if (!(err instanceof Error)) return 'connection failed';
  if (err.name === 'AbortError') return 'no data received';
  return err.message || 'connection failed';
}
