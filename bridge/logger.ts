import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

// Keys and passwords must never reach a log line, wherever they are nested.
const REDACT = [
  'apiKey',
  'apiKeys',
  'password',
  'authorization',
  'headers.authorization',
  '*.apiKey',
  '*.apiKeys',
  '*.password',
  '*.authorization',
  '*.headers.authorization',
  'config.upstreamApiKeys',
  'config.fallbackApiKeys',
  'config.adminToken',
  'config.brokerPassword',
];

/**
 * Without a destination, logs go to stdout asynchronously: a synchronous write per line would
 * stall the event loop whenever stdout is slow (a pipe, a busy terminal). What is still
 * buffered at exit is flushed then, so `process.exit` loses nothing.
 */
export function createLogger(level: LevelWithSilent = 'info', destination?: NodeJS.WritableStream): Logger {
  const options = { level, base: { service: 'edge-ai-bridge' }, redact: { paths: REDACT, censor: '[redacted]' } };
  return pino(options, destination ? (destination as pino.DestinationStream) : asyncStdout());
}

let stdout: ReturnType<typeof pino.destination> | undefined;

/** One per process, however many loggers (tests start many bridges in one process). */
function asyncStdout(): ReturnType<typeof pino.destination> {
  if (stdout) return stdout;
  const dest = pino.destination({ dest: 1, sync: false });
  process.once('exit', () => {
    try {
      dest.flushSync();
    } catch {
      // stdout already closed: nobody is left to read the lines.
    }
  });
  stdout = dest;
  return dest;
}

/**
 * A request's logger, made on first use: pino serialises (and redacts) a child's bindings when
 * it is made, which costs more than the lines most requests write (debug lines, off by default).
 */
export type LazyLog = () => Logger;

export function lazyChild(logger: Logger, bindings: { reqId: string; deviceId: string }): LazyLog {
  let child: Logger | undefined;
  return () => (child ??= logger.child(bindings));
}
