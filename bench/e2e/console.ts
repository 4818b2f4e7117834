// The end-to-end bench's terminal output and file lookup: log lines go to stderr so stdout
// carries only the report, and one progress line shows a long run is alive.
import { fileURLToPath } from 'node:url';

export function log(line: string): void {
  process.stderr.write(`bench: ${line}\n`);
}

/** One line rewritten in place on a TTY; nothing when piped, so logs stay clean. */
export function progress(line: string): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${line}`);
}

export function endProgress(): void {
  if (process.stderr.isTTY) process.stderr.write('\r\x1b[2K');
}

/** A compiled file by its path under dist/ (`upstream-sim/cli.js`), wherever this module sits. */
export function distFile(path: string): string {
  return fileURLToPath(new URL(`../../${path}`, import.meta.url));
}

export const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0);
