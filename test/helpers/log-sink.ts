// A pino destination that keeps what was logged, for tests that assert on log lines.
import { Writable } from 'node:stream';

export interface LogSink {
  stream: Writable;
  /** Everything written, as text. */
  text(): string;
  /** Every line, parsed. */
  lines(): Array<Record<string, unknown>>;
}

export function logSink(): LogSink {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  return {
    stream,
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
