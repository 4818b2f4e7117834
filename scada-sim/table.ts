// The live tag table as text: plain ANSI (clear, colours), no dependency. The CLI redraws it
// on a terminal; elsewhere it prints events line by line and the table once at the end.
import type { Tag, Violation } from './check.js';
import type { HostEvent } from './host.js';

const RESET = '\x1b[0m';
const COLOUR: Record<Tag['quality'], string> = { good: '\x1b[32m', bad: '\x1b[31m', stale: '\x1b[33m' };
const CLEAR = '\x1b[H\x1b[2J';
const WIDTH = { source: 40, metric: 32, value: 24 };

/** Device-sent text without control characters: an escape sequence in a value must not drive the terminal. */
const printable = (text: string): string => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
const cut = (raw: string, width: number): string => {
  const text = printable(raw);
  return text.length > width ? `${text.slice(0, width - 1)}…` : text.padEnd(width);
};

export function formatAge(ms: number): string {
  if (ms < 0) return '0s';
  if (ms < 60_000) return `${Math.floor(ms / 1000)}s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)}m`;
  return `${Math.floor(ms / 3_600_000)}h`;
}

/** One row per tag: source (device), metric, value, quality, age. */
export function formatTable(tags: Tag[], nowMs: number, colour: boolean): string {
  const header = `${'DEVICE'.padEnd(WIDTH.source)} ${'METRIC'.padEnd(WIDTH.metric)} ${'VALUE'.padEnd(WIDTH.value)} QUALITY AGE`;
  const rows = tags.map((t) => {
    const quality = t.quality.padEnd(7);
    const shown = colour ? `${COLOUR[t.quality]}${quality}${RESET}` : quality;
    return `${cut(t.source, WIDTH.source)} ${cut(t.metric, WIDTH.metric)} ${cut(String(t.value), WIDTH.value)} ${shown} ${formatAge(nowMs - t.timestampMs)}`;
  });
  return [header, ...rows].join('\n');
}

export interface Screen {
  hostId: string;
  url: string;
  tags: Tag[];
  violations: number;
  first?: Violation;
  rebirths: number;
  maxRows: number;
}

/** The whole terminal screen, drawn from the top. */
export function formatScreen(s: Screen, nowMs: number): string {
  const shown = s.tags.slice(0, s.maxRows);
  const more = s.tags.length - shown.length;
  return [
    `${CLEAR}scada-sim ${s.hostId} on ${s.url}  tags ${s.tags.length}  violations ${s.violations}  rebirths asked ${s.rebirths}`,
    ...(s.first === undefined ? [] : [`first violation: ${formatViolation(s.first)}`]),
    '',
    formatTable(shown, nowMs, true),
    ...(more > 0 ? [`… ${more} more`] : []),
    '',
  ].join('\n');
}

export const formatViolation = (v: Violation): string => `${v.kind}: ${printable(v.message)}`;

/** An event as one line, for a log or a pipe; undefined for those not worth a line. */
export function formatEvent(event: HostEvent): string | undefined {
  switch (event.kind) {
    case 'message':
      return `${printable(event.topic)}${event.retained ? ' (retained)' : ''} ${event.bytes} bytes`;
    case 'violation':
      return `violation ${formatViolation(event.violation)}`;
    case 'rebirth':
      return `rebirth asked: NCMD ${event.group}/${event.node}`;
    case 'state':
      return `STATE ${event.online ? 'online' : 'offline'}`;
  }
}
