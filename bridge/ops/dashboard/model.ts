// What the dashboard's server sends its page: the shapes of /dashboard/api/* bodies and of
// the events on /dashboard/api/events. The page (static/app.js) reads exactly these, and its
// type check (tsconfig.dashboard.json) reads this file without Node's types: import only types
// that need none (contract/names.ts and errors.ts, not the contract's index).
import type { ErrorCode } from '../../../contract/errors.js';
import type { Priority } from '../../../contract/names.js';
import type { UsageReport } from '../../store/usage-types.js';

/** p50 and p99 in milliseconds; null when nothing was observed in the interval. */
export type Percentiles = { p50: number; p99: number } | null;

/** The fleet over one tick (every instance's figures added up). */
export interface Point {
  /** Epoch ms at the end of the tick. */
  t: number;
  /** The seconds the rates cover (about a tick). */
  seconds: number;
  /** Replies per second, by priority. */
  rps: Record<Priority, number>;
  /** Replies per second, by outcome: `ok`, `cached`, or an error code. */
  outcomes: Partial<Record<'ok' | 'cached' | ErrorCode, number>>;
  /** Waiting requests by priority; null when the store did not answer. */
  depth: Record<Priority, number> | null;
  /** Queue wait (arrival to claim), by priority. */
  wait: Record<Priority, Percentiles>;
  /** End to end (arrival to reply) of ok replies, by priority. */
  e2e: Record<Priority, Percentiles>;
}

export interface InstanceView {
  instance: string;
  version: string;
  /** Epoch ms the instance started. */
  startedAt: number;
  broker: 'embedded' | 'external';
  store: 'memory' | 'redis';
  connectedClients: number;
  inFlight: number;
  storeReachable: boolean;
  ready: boolean;
  /** Why not ready (empty when ready): e.g. "store unreachable", "no upstream provider available". */
  notReady: string[];
  /** Epoch ms of its last report. */
  seenAt: number;
}

export interface KeyView {
  /** The first 8 hex characters of the key's SHA-256 (`none` for a keyless provider); never the key. */
  id: string;
  state: 'healthy' | 'cooling' | 'revoked';
}

export interface ProviderView {
  provider: string;
  circuit: 'closed' | 'open' | 'half-open';
  available: boolean;
  keys: KeyView[];
  /** HTTP calls per second over the tick (every instance). */
  callsPerS: number;
  /** Share of those calls that failed (timeouts, 5xx, refused keys; 429s apart), 0..1; null without calls. */
  errorRate: number | null;
  /** 429 answers per second over the tick. */
  rateLimitedPerS: number;
  /** Latency of answered calls. */
  latency: Percentiles;
}

/** Sent every tick. */
export interface TickEvent {
  point: Point;
  instances: InstanceView[];
  providers: ProviderView[];
  deadLetters: number;
}

/** Sent once, first, on every connection of /dashboard/api/events; the latest tick follows it at once. */
export interface HistoryEvent {
  tickMs: number;
  /** Oldest first; up to 15 minutes. */
  points: Point[];
}

export interface AccessView {
  /** Read-only views need no token (loopback HTTP_HOST and no ADMIN_TOKEN). */
  open: boolean;
  /** ADMIN_TOKEN is set: actions are possible with it. */
  actions: boolean;
}

export interface UsageView {
  /** The time zone whose midnight starts "today": the budgets' (UTC unless CONFIG_FILE sets one). */
  timeZone: string;
  today: UsageReport;
  last24h: UsageReport;
}

export interface RecentRequest {
  id: string;
  priority: Priority | null;
  /** `ok`, `cached`, or an error code. */
  outcome: string;
  /** Arrival to reply, ms; null when unknown. */
  latencyMs: number | null;
  /** Epoch ms of the reply. */
  at: number;
  instance: string;
}

export interface DeviceView {
  deviceId: string;
  connections: Array<{ clientId: string; instance: string }>;
  /** Newest first. */
  recent: RecentRequest[];
}

export interface DeadLetterView {
  key: string;
  deviceId: string;
  id: string;
  priority: Priority;
  /** ISO time it was dead-lettered. */
  at: string;
  error: { code: string; message: string } | null;
  attempts: number;
}
