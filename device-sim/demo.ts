#!/usr/bin/env node
// `npm run demo`: the service (with its bundled upstream simulator) on free ports, a fleet
// of 50 devices at 100 requests/s for 15 s, the result table, then a clean stop.
import { runFleet } from './fleet.js';
import { startServiceProcess } from './service-process.js';
import { formatTable, parseMix } from './stats.js';

const DEVICES = 50;
const RATE = 100;
const DURATION_S = 15;
const MIX = 'critical=1,high=9,normal=80,low=10';

async function main(): Promise<number> {
  process.stderr.write('demo: starting edge-ai-bridge on free ports with the bundled upstream simulator…\n');
  const service = await startServiceProcess({
    // The demo sends 6000 requests/min; the default upstream budget (600/min) would queue them.
    RATE_LIMIT_RPM: '60000',
    LOG_LEVEL: 'info',
  });
  const url = `mqtt://127.0.0.1:${service.mqttPort}`;
  process.stderr.write(`demo: service up (MQTT ${url}, admin http://127.0.0.1:${service.httpPort}/readyz)\n`);
  process.stderr.write(`demo: ${DEVICES} devices, ${RATE} requests/s for ${DURATION_S} s, mix ${MIX}\n`);
  try {
    const report = await runFleet({
      url,
      devices: DEVICES,
      rate: RATE,
      durationS: DURATION_S,
      mix: parseMix(MIX),
      qos: 1,
      prefix: 'demo',
      replyTimeoutMs: 30_000,
      onProgress: (line) => process.stderr.write(`demo: ${line}\n`),
    });
    process.stdout.write(`${formatTable(report)}\n`);
    return report.overall.lost === 0 ? 0 : 1;
  } finally {
    const code = await service.stop('SIGTERM');
    process.stderr.write(`demo: service stopped (exit ${code})\n`);
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`demo: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
