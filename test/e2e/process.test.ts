// The compiled service as a user runs it: exit codes, busy ports, SIGTERM.
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { mainScript, startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { ask, connectDevice } from '../helpers/harness.js';

function runToExit(
  env: Record<string, string>,
  entry: 'main-with-simulator' | 'main' = 'main-with-simulator',
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [mainScript(entry)], {
      env: { PATH: process.env.PATH ?? '', HTTP_PORT: '0', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

describe('service process', () => {
  let service: ServiceProcess | undefined;
  let upstream: UpstreamSim | undefined;
  afterEach(async () => {
    await service?.stop('SIGKILL');
    await upstream?.close();
    service = undefined;
    upstream = undefined;
  });

  const badValues: Array<[string, string]> = [
    ['RATE_LIMIT_RPM', '-5'],
    ['PRIORITY_OFFSETS_MS', 'critical=0,urgent=5'],
    ['MQTT_PORT', 'eighteen'],
    ['UPSTREAM_URL', 'not a url'],
    ['AUTH_FILE', '/nonexistent/auth.json'],
    ['LOG_LEVEL', 'loud'],
  ];
  for (const [variable, value] of badValues) {
    it(`exits 2 with one line naming ${variable} when it is ${value}`, async () => {
      const { code, stderr } = await runToExit({ MQTT_PORT: '0', [variable]: value });
      expect(code).toBe(2);
      expect(stderr.trim().split('\n')).toHaveLength(1);
      expect(stderr).toContain(variable);
    });
  }

  it('main.js, the service entry, exits 2 naming UPSTREAM_URL when it is unset: it never answers from the simulator', async () => {
    const { code, stderr } = await runToExit({ MQTT_PORT: '0' }, 'main');
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toEqual([expect.stringMatching(/^edge-ai-bridge: UPSTREAM_URL: not set/)]);
  });

  it('exits 2 with one line for each bad variable, all at once', async () => {
    const { code, stderr } = await runToExit({ MQTT_PORT: '0', RATE_LIMIT_RPM: '-5', LOG_LEVEL: 'loud' });
    expect(code).toBe(2);
    expect(stderr.trim().split('\n')).toEqual([
      'edge-ai-bridge: RATE_LIMIT_RPM: must be at least 1 (got "-5")',
      'edge-ai-bridge: LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent (got "loud")',
    ]);
  });

  it('refuses a non-loopback listener without AUTH_FILE or ALLOW_ANONYMOUS=true, naming both', async () => {
    const { code, stderr } = await runToExit({ MQTT_PORT: '0', MQTT_HOST: '0.0.0.0' });
    expect(code).toBe(2);
    expect(stderr).toMatch(/AUTH_FILE/);
    expect(stderr).toMatch(/ALLOW_ANONYMOUS/);
  });

  it('exits 2 with a clear line when the MQTT port is in use', async () => {
    const blocker = createServer().listen(0, '127.0.0.1');
    await new Promise((r) => blocker.once('listening', r));
    const port = (blocker.address() as AddressInfo).port;
    try {
      const { code, stderr } = await runToExit({ MQTT_PORT: String(port) });
      expect(code).toBe(2);
      expect(stderr.trim()).toBe(`edge-ai-bridge: MQTT port ${port} is in use — set MQTT_PORT`);
    } finally {
      blocker.close();
    }
  });

  it('on SIGTERM lets in-flight requests finish, publishes offline and exits 0', async () => {
    upstream = await startUpstreamSim({ port: 0, latencyMs: 800 });
    service = await startServiceProcess({ UPSTREAM_URL: upstream.url, LOG_LEVEL: 'info' });
    const device = await connectDevice(`mqtt://127.0.0.1:${service.mqttPort}`, 'cam-9');
    const statuses: string[] = [];
    device.client.on('message', (topic, payload) => {
      if (topic.startsWith('bridge/')) statuses.push((JSON.parse(payload.toString()) as { state: string }).state);
    });
    await device.client.subscribeAsync('bridge/+/status', { qos: 1 });
    for (const id of ['a', 'b', 'c']) await device.publish('normal', ask(id));
    await upstream.requested(3);

    service.child.kill('SIGTERM');
    const replies = await Promise.all(['a', 'b', 'c'].map((id) => device.reply(id, { timeoutMs: 5000 })));
    expect(replies.map(([r]) => r?.ok)).toEqual([true, true, true]);
    expect(await service.exited).toBe(0);
    expect(statuses).toEqual(['online', 'offline']);
    await device.client.endAsync(true);
  });

  it('on SIGTERM answers what cannot finish within SHUTDOWN_GRACE_MS with unavailable, then exits 0', async () => {
    upstream = await startUpstreamSim({ port: 0, latencyMs: 5000 });
    service = await startServiceProcess({ UPSTREAM_URL: upstream.url, SHUTDOWN_GRACE_MS: '300', MAX_CONCURRENCY: '1' });
    const device = await connectDevice(`mqtt://127.0.0.1:${service.mqttPort}`, 'cam-10');
    await device.publish('normal', ask('in-flight'));
    await device.publish('normal', ask('queued'));
    await upstream.requested(1);

    service.child.kill('SIGTERM');
    const [inFlight] = await device.reply('in-flight', { timeoutMs: 5000 });
    const [queued] = await device.reply('queued', { timeoutMs: 5000 });
    expect(inFlight).toMatchObject({ ok: false, error: { code: 'unavailable' } });
    expect(queued).toMatchObject({ ok: false, error: { code: 'unavailable' } });
    expect(await service.exited).toBe(0);
    expect(upstream.requests).toHaveLength(1);
    await device.client.endAsync(true);
  });
});
