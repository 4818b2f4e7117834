// `npm run demo` finds a bridge already running on this machine on ports other than the
// defaults, as docs/dashboard.md says: its admin port from HTTP_PORT (or --admin), its MQTT
// port from its /readyz; the bridge is the one that answers the demo's devices (build first:
// `npm run build`).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';

const DEMO = fileURLToPath(new URL('../../dist/device-sim/demo.js', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function demo(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [DEMO, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => done({ code, stdout, stderr }));
  });
}

/** The bridge's ok replies, from its /metrics. */
async function okReplies(service: ServiceProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${service.httpPort}/metrics`)).text();
  return [...text.matchAll(/^edge_ai_bridge_requests_total\{[^}]*outcome="ok"[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
}

/** The "overall" row's sent and ok columns of the demo's result table. */
function overall(stdout: string): { sent: number; ok: number } {
  const cells =
    stdout
      .split('\n')
      .find((line) => line.trim().startsWith('overall'))
      ?.trim()
      .split(/\s+/) ?? [];
  return { sent: Number(cells[1]?.replace(/\D/g, '')), ok: Number(cells[2]?.replace(/\D/g, '')) };
}

describe('npm run demo', () => {
  let service: ServiceProcess | undefined;
  afterEach(async () => {
    await service?.stop('SIGTERM');
    service = undefined;
  });

  it.each([
    ['HTTP_PORT', (s: ServiceProcess) => ({ args: [], env: { HTTP_PORT: String(s.httpPort) } })],
    ['--admin', (s: ServiceProcess) => ({ args: ['--admin', `http://127.0.0.1:${s.httpPort}`], env: {} })],
  ])(
    'sends its devices to the bridge running on free ports, found by %s',
    async (_how, given) => {
      service = await startServiceProcess({ LOG_LEVEL: 'info' });
      expect(service.httpPort).not.toBe(9464);
      expect(service.mqttPort).not.toBe(1883);
      const { args, env } = given(service);
      const run = await demo([...args, '--duration', '2'], env);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toContain(`a bridge runs here: sending to it (mqtt://127.0.0.1:${service.mqttPort})`);
      const { sent, ok } = overall(run.stdout);
      expect(sent).toBeGreaterThan(0);
      expect(ok).toBe(sent);
      // That bridge answered them, not one the demo started.
      expect(await okReplies(service)).toBe(ok);
    },
    30_000,
  );
});
