// The progress line on stderr while a fleet runs: rewritten in place on a terminal, one plain
// line every few seconds otherwise (a log file or CI). stdout stays for the result alone.
import { answeredOf, hints, type Diagnosis } from './diagnosis.js';

/** What an engine counts while it runs. */
export interface LiveCounts {
  sent: number;
  ok: number;
  /** Error replies by code. */
  errors: Record<string, number>;
  /** Sent and not yet answered. */
  inFlight: number;
  diagnosis: Diagnosis;
}

export interface Output {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface Progress {
  /** A phase line (connecting, sending, waiting), kept apart from the live line. */
  log(line: string): void;
  /** Starts the line, reading the counts at each tick. */
  start(read: () => LiveCounts): void;
  /** Stops it, clearing the live line; the last counts are not printed again. */
  stop(): void;
}

const TTY_INTERVAL_MS = 500;
export const PLAIN_INTERVAL_MS = 5_000;
/** Nothing answered this long after the first send: the no-answer hint is shown. */
export const NO_ANSWER_CLEAR_S = 5;
const CLEAR = '\r\x1b[2K';

export function startProgress(out: Output, plainIntervalMs = PLAIN_INTERVAL_MS): Progress {
  const tty = out.isTTY === true;
  let timer: NodeJS.Timeout | undefined;
  let shown = '';
  let started = 0;
  let last = { at: 0, answered: 0 };
  const tick = (read: () => LiveCounts): void => {
    const now = performance.now();
    const counts = read();
    const answered = answeredOf(counts.ok, counts.errors);
    const rate = now > last.at ? ((answered - last.answered) * 1000) / (now - last.at) : 0;
    last = { at: now, answered };
    const line = progressLine(counts, (now - started) / 1000, rate);
    if (tty) out.write(`${CLEAR}${line}`);
    else out.write(`${line}\n`);
    shown = tty ? line : '';
  };
  return {
    log(line) {
      out.write(`${shown === '' ? '' : CLEAR}device-sim: ${line}\n`);
      if (shown !== '') out.write(shown);
    },
    start(read) {
      started = performance.now();
      last = { at: started, answered: 0 };
      timer = setInterval(() => tick(read), tty ? TTY_INTERVAL_MS : plainIntervalMs);
    },
    stop() {
      clearInterval(timer);
      timer = undefined;
      if (shown !== '') out.write(CLEAR);
      shown = '';
    },
  };
}

/**
 * `device-sim: 12.0 s  sent 1200  answered 1190  ok 1180  errors queue_full 10  in flight 10  98.5/s`
 * (the rate: answers per second since the last line), and a hint once it is clear.
 */
export function progressLine(counts: LiveCounts, elapsedS: number, answersPerS: number): string {
  const answered = answeredOf(counts.ok, counts.errors);
  const errors = Object.entries(counts.errors)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([code, n]) => `${code} ${n}`);
  const hint = liveHint(counts, answered, elapsedS);
  return (
    `device-sim: ${elapsedS.toFixed(1)} s  sent ${counts.sent}  answered ${answered}  ok ${counts.ok}  errors ${errors.join(', ') || 'none'}  ` +
    `in flight ${counts.inFlight}  ${answersPerS.toFixed(1)}/s${hint === undefined ? '' : `  — ${hint}`}`
  );
}

/** Refusals show at once; "nothing answers" only once nothing has for NO_ANSWER_CLEAR_S. */
function liveHint(counts: LiveCounts, answered: number, elapsedS: number): string | undefined {
  const silent = answered === 0 && counts.sent > 0 && elapsedS >= NO_ANSWER_CLEAR_S;
  return hints(counts.diagnosis, silent ? 0 : Math.max(answered, 1))[0];
}
