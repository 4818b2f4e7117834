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
];

export function createLogger(level: LevelWithSilent = 'info', destination?: NodeJS.WritableStream): Logger {
  const options = { level, base: { service: 'edge-ai-bridge' }, redact: { paths: REDACT, censor: '[redacted]' } };
  return destination ? pino(options, destination as pino.DestinationStream) : pino(options);
}
