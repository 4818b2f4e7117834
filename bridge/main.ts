// The process: configuration, signals and exit codes around the composition root (app.ts).
import { setFlagsFromString } from 'node:v8';

import { startUpstreamSim, type UpstreamSim } from '../upstream-sim/sim.js';
import { startBridge, type RunningBridge } from './app.js';
import { ConfigError, ListenError } from '../contract/index.js';
import { loadConfig, isLoopback, type Config } from './config/config.js';
import { readConfigFile, upstreamSettings } from './config/config-file.js';
import { createLogger } from './logger.js';

function fail(message: string): never {
  process.stderr.write(`edge-ai-bridge: ${message}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
    // A bad CONFIG_FILE (unreadable, invalid, naming unknown providers) stops the start before
    // anything runs; startBridge reads it again for real, with the resolved UPSTREAM_URL.
    upstreamSettings({ ...config, upstreamUrl: config.upstreamUrl ?? 'http://127.0.0.1/v1' }, readConfigFile(config.configFile));
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }
  // V8 lets the old generation grow to several times what was live at its last full
  // collection before it collects again. A connection burst promotes each handshake's
  // short-lived objects (they outlive two young collections while the handshake waits), so
  // 20 000 connecting devices left ~140 MB of dead objects held for half a minute. A fixed
  // factor collects sooner: RSS at the burst's peak 396 → 311–343 MB, and under load 270 →
  // 180 MB, for ~3 % more CPU (README, Performance). Read by V8 at every collection, so it
  // takes effect when set here.
  if (config.heapGrowingPercent > 0) setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  const logger = createLogger(config.logLevel);
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
    if (err instanceof ListenError || err instanceof ConfigError) fail(err.message);
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
  // Re-reads AUTH_FILE; connected clients stay (a bad file keeps the users already loaded).
  process.on('SIGHUP', () => {
    logger.info({ signal: 'SIGHUP' }, 'signal received');
    bridge.mqtt.reloadAuth();
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`edge-ai-bridge: failed to start: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
