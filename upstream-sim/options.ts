// The upstream simulator's options: what a caller may set, the checks on them, and the
// settings (options with defaults applied) a running simulator reads on every call.

export interface UpstreamSimOptions {
  /** 0 picks a free port. */
  port: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Base answer latency; default 50. */
  latencyMs?: number;
  /** Latency varies uniformly by ± this much; default 0. */
  jitterMs?: number;
  /** Share of chat/embeddings calls answered 500, 0..1; default 0. */
  errorRate?: number;
  /** Calls per rolling 60 s window; over it: 429 with Retry-After. Unset = unlimited. */
  rateLimitRpm?: number;
  /** Share of chat/embeddings calls never answered (socket kept open until close()), 0..1; default 0. */
  hangRate?: number;
  /**
   * API keys this upstream refuses: a call with one of them is answered 401 (OpenAI's
   * invalid_api_key), before any scripted step or random fault. Default none.
   */
  revokedKeys?: string[];
  /**
   * Models a key may not use, as a gateway with per-key model lists refuses them: a chat or
   * embeddings call naming `model` with `key` (`*`: any key, or none) is answered 403. GET
   * /v1/models with that key is still answered. Default none.
   */
  refusedModels?: Array<{ key: string; model: string }>;
  /** Pads each chat answer's content to at least this many bytes (large replies); default 0. */
  answerBytes?: number;
  /** A streaming call (`"stream": true`) sends one chunk every this many ms; default 10. */
  streamChunkMs?: number;
}

export type UpstreamSimSettings = Required<Omit<UpstreamSimOptions, 'rateLimitRpm'>> & {
  rateLimitRpm: number | undefined;
};

function isRefusal(r: unknown): boolean {
  if (typeof r !== 'object' || r === null) return false;
  const { key, model } = r as { key?: unknown; model?: unknown };
  return typeof key === 'string' && key !== '' && typeof model === 'string' && model !== '';
}

/** Checks option values; returns a message naming the first bad one, or null. */
export function checkUpstreamSimOptions(opts: Partial<UpstreamSimOptions>): string | null {
  const nonNegative = (name: string, v: number | undefined): string | null =>
    v === undefined || (Number.isFinite(v) && v >= 0) ? null : `${name} must be a non-negative number, got ${v}`;
  const share = (name: string, v: number | undefined): string | null =>
    v === undefined || (Number.isFinite(v) && v >= 0 && v <= 1) ? null : `${name} must be between 0 and 1, got ${v}`;
  if (opts.port !== undefined && !(Number.isInteger(opts.port) && opts.port >= 0 && opts.port <= 65535)) {
    return `port must be an integer from 0 to 65535, got ${opts.port}`;
  }
  if (opts.host !== undefined && opts.host.trim() === '') return 'host must not be empty';
  if (opts.revokedKeys !== undefined && !(Array.isArray(opts.revokedKeys) && opts.revokedKeys.every((k) => typeof k === 'string' && k !== ''))) {
    return 'revokedKeys must be a list of non-empty keys';
  }
  if (opts.refusedModels !== undefined && !(Array.isArray(opts.refusedModels) && opts.refusedModels.every(isRefusal))) {
    return 'refusedModels must be a list of { key, model } with non-empty strings';
  }
  if (opts.rateLimitRpm !== undefined && !(Number.isInteger(opts.rateLimitRpm) && opts.rateLimitRpm > 0)) {
    return `rateLimitRpm must be a positive integer, got ${opts.rateLimitRpm}`;
  }
  if (opts.answerBytes !== undefined && !(Number.isInteger(opts.answerBytes) && opts.answerBytes >= 0 && opts.answerBytes <= 16_777_216)) {
    return `answerBytes must be an integer from 0 to 16777216, got ${opts.answerBytes}`;
  }
  return (
    nonNegative('latencyMs', opts.latencyMs) ??
    nonNegative('streamChunkMs', opts.streamChunkMs) ??
    nonNegative('jitterMs', opts.jitterMs) ??
    share('errorRate', opts.errorRate) ??
    share('hangRate', opts.hangRate)
  );
}

/** The options with defaults filled in; throws RangeError naming a bad value. */
export function settingsFrom(opts: UpstreamSimOptions): UpstreamSimSettings {
  const problem = checkUpstreamSimOptions(opts);
  if (problem !== null) throw new RangeError(problem);
  return {
    port: opts.port,
    host: opts.host ?? '127.0.0.1',
    latencyMs: opts.latencyMs ?? 50,
    jitterMs: opts.jitterMs ?? 0,
    errorRate: opts.errorRate ?? 0,
    rateLimitRpm: opts.rateLimitRpm,
    hangRate: opts.hangRate ?? 0,
    revokedKeys: opts.revokedKeys ?? [],
    refusedModels: opts.refusedModels ?? [],
    answerBytes: opts.answerBytes ?? 0,
    streamChunkMs: opts.streamChunkMs ?? 10,
  };
}

/** Changes settings in place (the running simulator reads them per call); throws RangeError on a bad value. */
export function applyOptions(settings: UpstreamSimSettings, partial: Partial<Omit<UpstreamSimOptions, 'port' | 'host'>>): void {
  const bad = checkUpstreamSimOptions(partial);
  if (bad !== null) throw new RangeError(bad);
  for (const [key, value] of Object.entries(partial)) {
    // An explicit undefined rateLimitRpm lifts the limit; other undefined values leave settings alone.
    if (value !== undefined || key === 'rateLimitRpm') Object.assign(settings, { [key]: value });
  }
}
