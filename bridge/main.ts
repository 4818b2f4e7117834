// The process: configuration, signals and exit codes around the composition root (app.ts).
import { setFlagsFromString } from 'node:v8';
import { ConfigError, ListenError } from '../contract/index.js';
import { startUpstreamSim, type UpstreamSim } from '../upstream-sim/sim.js';
import { startBridge, type RunningBridge } from './app.js';
import { loadConfig, isLoopback, type Config } from './config/config.js';
import { infoRequested } from './ops/cli/help.js';
import { findTypos, typoMessage } from './config/typos.js';
import { loadedLine } from './config/config-file.js';
import { createLogger } from './logger.js';

/** Exit 2 with one line per problem, each naming what to fix. */
function fail(err: ConfigError | ListenError): never {
  const lines = err instanceof ConfigError ? err.problems.map((p) => `${p.variable}: ${p.problem}`) : [err.message];
  for (const line of lines) process.stderr.write(`edge-ai-bridge: ${line}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  let config: Config;
  try {
    // The environment and CONFIG_FILE, read once; a problem stops the start before anything runs.
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(err);
    throw err;
  }
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

  let sim: UpstreamSim | undefined;
  let upstreamUrl = config.upstreamUrl;
  if (upstreamUrl === undefined) {
    sim = await startUpstreamSim({ port: 0, latencyMs: 50, jitterMs: 10 });
    upstreamUrl = sim.url;
    logger.warn(
      { upstreamUrl },
      'UPSTREAM_URL is not set: answers come from the bundled upstream SIMULATOR, not a real model',
    );
  }

  let bridge: RunningBridge;
  try {
    bridge = await startBridge({ ...config, upstreamUrl }, logger);
  } catch (err) {
    if (err instanceof ListenError || err instanceof ConfigError) fail(err);
    throw err;
  }

  let signalled = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (signalled) return;
    signalled = true;
    logger.info({ signal }, 'signal received');
    bridge
      .shutdown()
      .then(() => sim?.close())
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

// `npm start -- --help` (or --version) prints and starts nothing; `edge-ai-bridge start` passes "start" first.
const info = infoRequested(process.argv.slice(2));
if (info !== undefined) process.stdout.write(info);
else {
  main().catch((err: unknown) => {
    process.stderr.write(`edge-ai-bridge: failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
