#!/usr/bin/env node
// `npm run demo`: the service (with its bundled upstream simulator) on free ports, a fleet
// of 50 devices (device code on edge-ai-bridge/client) at 100 requests/s for 15 s, the result
// table, then a clean stop. When a
// bridge already runs here (`npm start`: its admin port answers), the devices go to it
// instead, within its default upstream budget, so its dashboard shows them. Its admin port is
// HTTP_PORT (and HTTP_HOST), as for the bridge, or `--admin URL`; its MQTT port, whatever it
// is, comes from its /readyz.
// `npm run demo -- --providers`: the same against two simulated providers, the primary
// failing 20% of its calls, with recurring questions; it also reports how many calls the
// fallback served and how many the cache and coalescing saved.
import { parseArgs } from 'node:util';
import { runFleet } from './fleet.js';
import { startServiceProcess } from './service-process.js';
import { parseMix } from './stats.js';
import { formatReport } from './summary.js';
import { startUpstreamSim, type UpstreamSim } from '../upstream-sim/sim.js';

const DEVICES = 50;
const RATE = 100;
const DURATION_S = 15;
const MIX = 'critical=1,high=9,normal=80,low=10';
const PRIMARY_ERROR_RATE = 0.2;
/** Distinct questions in the providers demo: identical requests recur, as on a real line. */
const QUESTIONS = 300;

const say = (line: string): void => {
  process.stderr.write(`demo: ${line}\n`);
};

/** The running bridge's request rate: within the default RATE_LIMIT_RPM (600/min). */
const RUNNING_RATE = 8;
const RUNNING_DURATION_S = 60;

/** Where a running bridge's admin HTTP would be: `--admin`, else HTTP_HOST:HTTP_PORT as the bridge reads them. */
function adminUrl(admin: string | undefined, env: NodeJS.ProcessEnv): URL {
  if (admin !== undefined) return new URL(admin);
  // A bridge bound to every address answers on loopback.
  const host = env.HTTP_HOST === undefined || env.HTTP_HOST === '0.0.0.0' || env.HTTP_HOST === '::' ? '127.0.0.1' : env.HTTP_HOST;
  return new URL(`http://${host.includes(':') ? `[${host}]` : host}:${env.HTTP_PORT ?? '9464'}`);
}

/** The MQTT URL of a bridge running with an embedded broker at `admin`, if any. */
async function runningBridge(admin: URL): Promise<string | undefined> {
  try {
    const res = await fetch(new URL('/readyz', admin), { signal: AbortSignal.timeout(1000) });
    const body = (await res.json()) as { ports?: { mqtt?: number } };
    if (body.ports?.mqtt === undefined) say(`the bridge at ${admin.origin} has no embedded broker (BROKER_URL): starting one of its own`);
    return body.ports?.mqtt === undefined ? undefined : `mqtt://${admin.hostname}:${body.ports.mqtt}`;
  } catch {
    return undefined;
  }
}

/** Load on the bridge `npm start` runs: its dashboard shows it. */
async function onRunning(url: string, admin: URL, durationS: number): Promise<number> {
  say(`a bridge runs here: sending to it (${url}); watch it at ${admin.origin}/`);
  say(`${DEVICES} devices, ${RUNNING_RATE} requests/s for ${durationS} s (its default upstream budget is 600/min), mix ${MIX}`);
  const report = await runFleet({
    url,
    devices: DEVICES,
    rate: RUNNING_RATE,
    durationS,
    mix: parseMix(MIX),
    qos: 1,
    client: true,
    prefix: 'demo',
    replyTimeoutMs: 30_000,
    onProgress: (line) => say(line),
  });
  process.stdout.write(`${formatReport(report)}\n`);
  return report.overall.lost === 0 ? 0 : 1;
}

interface DemoOptions {
  providers: boolean;
  admin: URL;
  /** Seconds of load; unset: 15 on a bridge of its own, 60 on a running one. */
  durationS: number | undefined;
}

async function main({ providers, admin, durationS }: DemoOptions): Promise<number> {
  const running = providers ? undefined : await runningBridge(admin);
  if (running !== undefined) return onRunning(running, admin, durationS ?? RUNNING_DURATION_S);
  const sims: UpstreamSim[] = [];
  // The demo sends 6000 requests/min; the default upstream budget (600/min) would queue them.
  const env: Record<string, string> = { RATE_LIMIT_RPM: '60000', LOG_LEVEL: 'info' };
  if (providers) {
    const primary = await startUpstreamSim({ port: 0, latencyMs: 50, jitterMs: 10, errorRate: PRIMARY_ERROR_RATE });
    const fallback = await startUpstreamSim({ port: 0, latencyMs: 80, jitterMs: 10 });
    sims.push(primary, fallback);
    Object.assign(env, { UPSTREAM_URL: primary.url, FALLBACK_URL: fallback.url, FALLBACK_MODEL: 'fallback-model' });
    say(`primary ${primary.url} (${PRIMARY_ERROR_RATE * 100}% answered 500), fallback ${fallback.url}`);
  } else {
    say('starting edge-ai-bridge on free ports with the bundled upstream simulator…');
  }
  const service = await startServiceProcess(env);
  const url = `mqtt://127.0.0.1:${service.mqttPort}`;
  say(`service up (MQTT ${url}); watch it at http://127.0.0.1:${service.httpPort}/`);
  say(`${DEVICES} devices, ${RATE} requests/s for ${durationS ?? DURATION_S} s, mix ${MIX}${providers ? `, ${QUESTIONS} distinct questions` : ''}`);
  try {
    const report = await runFleet({
      url,
      devices: DEVICES,
      rate: RATE,
      durationS: durationS ?? DURATION_S,
      mix: parseMix(MIX),
      qos: 1,
      client: true,
      prefix: 'demo',
      replyTimeoutMs: 30_000,
      ...(providers ? { questions: QUESTIONS } : {}),
      onProgress: (line) => say(line),
    });
    process.stdout.write(`${formatReport(report)}\n`);
    if (providers) {
      const [primary, fallback] = sims.map((s) => s.stats()) as [ReturnType<UpstreamSim['stats']>, ReturnType<UpstreamSim['stats']>];
      const answered = (primary.byStatus['200'] ?? 0) + (fallback.byStatus['200'] ?? 0);
      process.stdout.write(
        [
          `primary:  ${primary.total} calls, ${primary.byStatus['200'] ?? 0} answered, ${primary.byStatus['500'] ?? 0} failed (500)`,
          `fallback: ${fallback.total} calls, ${fallback.byStatus['200'] ?? 0} answered`,
          `replies ok: ${report.overall.ok}; upstream answers: ${answered}; saved by the cache and coalescing: ${report.overall.ok - answered} calls`,
        ].join('\n') + '\n',
      );
    }
    return report.overall.lost === 0 ? 0 : 1;
  } finally {
    const code = await service.stop('SIGTERM');
    say(`service stopped (exit ${code})`);
    await Promise.all(sims.map((s) => s.close()));
  }
}

const { values } = parseArgs({ options: { providers: { type: 'boolean' }, admin: { type: 'string' }, duration: { type: 'string' } } });
const durationS = values.duration === undefined ? undefined : Number(values.duration);
if (durationS !== undefined && !(durationS > 0)) {
  say(`--duration must be a number of seconds over 0, not ${values.duration}`);
  process.exit(2);
}
main({ providers: values.providers === true, admin: adminUrl(values.admin, process.env), durationS }).then(
  (code) => process.exit(code),
  (err: unknown) => {
    say(err instanceof Error ? err.message : String(err));
    process.exit(1);
  },
);
