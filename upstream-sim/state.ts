// A running upstream simulator's state in one object: the live settings, what it recorded
// and counted, the fault queue and rate window, and the timers close() cancels.
import type { FaultContext } from './faults.js';
import type { UpstreamSimSettings } from './options.js';
import { emptyStats } from './stats.js';

export interface RecordedRequest {
  path: string;
  /** Lower-cased header names, as node gives them. */
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body; null when the body was not valid JSON. */
  body: unknown;
  /** Epoch ms at arrival. */
  at: number;
  /** Epoch ms when the response was fully handed to the socket; unset while unanswered (or hanging). */
  answeredAt?: number;
}

export interface SimState extends FaultContext {
  /** Every chat/embeddings request received, in arrival order; the same array for the simulator's life. */
  readonly requests: RecordedRequest[];
  /** Numbers chat completion ids; not reset, so ids stay unique for the simulator's life. */
  completionSeq: number;
  closed: boolean;
  /** Called after each call is recorded: tests wait on arrivals instead of sleeping. */
  readonly arrivals: Set<() => void>;
}

export function createState(settings: UpstreamSimSettings): SimState {
  return { settings, requests: [], stats: emptyStats(), steps: [], window: [], timers: new Set(), completionSeq: 0, closed: false, arrivals: new Set() };
}

/** Forgets requests, stats, queued script steps and the rate window; settings stay. */
export function resetState(state: SimState): void {
  state.requests.length = 0;
  state.stats = emptyStats();
  state.steps = [];
  state.window = [];
}
