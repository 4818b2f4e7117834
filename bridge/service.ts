// The process: configuration, signals and exit codes around the composition root (app.ts).
// Its entries choose the upstream: main.ts (the service) needs UPSTREAM_URL;
// main-with-simulator.ts (`npm start`) answers from the bundled simulator while it is unset.
import { setFlagsFromString } from 'node:v8';
import { ConfigError, ListenError } from '../contract/index.js';
import { startBridge, type RunningBridge } from './app.js';
import { loadConfig, isLoopback, type Config } from './config/config.js';
import { infoRequested } from './ops/cli/help.js';
import { findTypos, typoMessage } from './config/typos.js';
import { loadedLine } from './config/config-file.js';
import { createLogger, type Logger } from './logger.js';

/** An upstream the process runs itself while UPSTREAM_URL is unset, closed after the bridge. */
export interface StandInUpstream {
  url: string;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Starts the stand-in; without it an unset UPSTREAM_URL stops the start (exit 2). */
  standIn?: () => Promise<StandInUpstream>;
}

/** Exit 2 with one line per problem, each naming what to fix. */
function fail(err: ConfigError | ListenError): never {
  const lines = err instanceof ConfigError ? err.problems.map((p) => `${p.variable}: ${p.problem}`) : [err.message];
  for (const line of lines) process.stderr.write(`edge-ai-bridge: ${line}\n`);
  process.exit(2);
}

function readConfig(): Config {
  try {
    // The environment and CONFIG_FILE, read once; a problem stops the start before anything runs.
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(err);
    throw err;
  }
}

/** The upstream to call: UPSTREAM_URL, or the entry's stand-in announced by a loud line. */
async function upstreamOf(config: Config, options: ServiceOptions, logger: Logger): Promise<{ url: string; standIn?: StandInUpstream }> {
  if (config.upstreamUrl !== undefined) return { url: config.upstreamUrl };
  if (options.standIn === undefined) {
    fail(new ConfigError('UPSTREAM_URL', 'not set: point it at an OpenAI-compatible API (`npm start` answers from the bundled simulator instead)'));
  }
  const standIn = await options.standIn();
  logger.warn({ upstreamUrl: standIn.url }, 'UPSTREAM_URL is not set: answers come from the bundled upstream SIMULATOR, not a real model');
  return { url: standIn.url, standIn };
}

async function main(options: ServiceOptions): Promise<void> {
  const config = readConfig();
  // A connection burst promotes each handshake's short-lived objects to V8's old generation,
  // which then grows to several times what is live before it is collected again; a fixed,
  // smaller growing factor collects those sooner for a little more CPU (docs/performance.md).
  // V8 reads the flag at every collection, so it takes effect when set here.
  if (config.heapGrowingPercent > 0) setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  const logger = createLogger(config.logLevel);
  for (const typo of findTypos(process.env)) logger.warn(typo, typoMessage(typo));
  if (config.configFile !== undefined) {
    const { fields, message } = loadedLine(config.configFile, config.file, process.env);
    logger.info(fields, message);
  }
  if (!isLoopback(config.mqttHost) && config.allowAnonymous) {
    logger.warn({ host: config.mqttHost }, 'ALLOW_ANONYMOUS=true on a non-loopback listener: any device on the network may connect');
  }
  const upstream = await upstreamOf(config, options, logger);
  let bridge: RunningBridge;
  try {
    bridge = await startBridge({ ...config, upstreamUrl: upstream.url }, logger);
  } catch (err) {
    if (err instanceof ListenError || err instanceof ConfigError) fail(err);
    throw err;
  }
  handleSignals(bridge, logger, upstream.standIn);
}

function handleSignals(bridge: RunningBridge, logger: Logger, standIn: StandInUpstream | undefined): void {
  let signalled = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (signalled) return;
    signalled = true;
    logger.info({ signal }, 'signal received');
    bridge
      .shutdown()
      .then(() => standIn?.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Re-reads AUTH_FILE and CONFIG_FILE's templates, weights and budgets; connected clients stay
  // (a bad file keeps the users, or the CONFIG_FILE parts, already loaded).
  process.on('SIGHUP', () => {
    logger.info({ signal: 'SIGHUP' }, 'signal received');
    bridge.mqtt.reloadAuth();
    bridge.reloadConfig();
  });
}

/** Runs the service; `--help` (or --version) prints and starts nothing. */
export function runService(options: ServiceOptions = {}): void {
  // `edge-ai-bridge start` passes "start" first.
  const info = infoRequested(process.argv.slice(2));
  if (info !== undefined) {
    process.stdout.write(info);
    return;
  }
  main(options).catch((err: unknown) => {
    process.stderr.write(`edge-ai-bridge: failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
