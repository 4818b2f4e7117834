// The installed command as an operator runs it: `node dist/bridge/cli.js …`, its output and
// exit codes (build first: `npm run build`).
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { VARIABLES } from '../../bridge/config/variables.js';
import { mainScript, startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startHarness, type Harness } from '../helpers/harness.js';

const CLI = fileURLToPath(new URL('../../dist/bridge/cli.js', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(script: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const cli = (args: string[], env?: Record<string, string>): Promise<Run> => run(CLI, args, env);

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('edge-ai-bridge command', () => {
  let harness: Harness | undefined;
  let service: ServiceProcess | undefined;
  let server: Server | undefined;
  afterEach(async () => {
    await harness?.close();
    await service?.stop('SIGKILL');
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    harness = undefined;
    service = undefined;
    server = undefined;
  });

  it('--help lists the commands and every variable of the schema', async () => {
    const { code, stdout } = await cli(['--help']);
    expect(code).toBe(0);
    for (const command of ['start', 'check', 'health', 'dlq', 'usage', 'budgets', 'hash-password', 'version']) expect(stdout).toContain(`  ${command}`);
    const listed = stdout.split('\n').flatMap((line) => /^ {2}([A-Z][A-Z0-9_]+)\b/.exec(line)?.[1] ?? []);
    expect(listed.sort()).toEqual([...VARIABLES].sort());
  });

  it('main.js --help and --version print and start nothing, even with a bad variable', async () => {
    const help = await run(mainScript('main'), ['--help'], { MQTT_PORT: 'not a port' });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('MQTT_PORT');
    const version = await run(mainScript('main'), ['--version']);
    expect(version).toMatchObject({ code: 0, stderr: '' });
    expect(version.stdout).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('check: "configuration ok" and a summary, exit 0', async () => {
    const { code, stdout } = await cli(['check'], { MQTT_PORT: '18830' });
    expect(code).toBe(0);
    expect(stdout).toMatch(/^configuration ok\n.*MQTT on 127\.0\.0\.1:18830.*\n$/);
  });

  it('check: exit 2 with one line per problem, each naming the variable', async () => {
    const { code, stdout, stderr } = await cli(['check'], { RATE_LIMIT_RPM: '-5', AUTH_FILE: '/nonexistent/auth.json', LOG_LEVEL: 'loud' });
    expect(code).toBe(2);
    expect(stdout).toBe('');
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/RATE_LIMIT_RPM/);
    expect(lines[1]).toMatch(/AUTH_FILE/);
    expect(lines[2]).toMatch(/LOG_LEVEL/);
  });

  it('check: warns about a misspelt variable, naming the one it resembles', async () => {
    const { code, stderr } = await cli(['check'], { MQTT_PROT: '1884', REDIS_ULR: 'redis://x', HOME: '/root', NODE_OPTIONS: '' });
    expect(code).toBe(0);
    expect(stderr.trim().split('\n')).toEqual([
      'edge-ai-bridge: warning: MQTT_PROT is not a variable the bridge reads: did you mean MQTT_PORT?',
      'edge-ai-bridge: warning: REDIS_ULR is not a variable the bridge reads: did you mean REDIS_URL?',
    ]);
  });

  it('the service logs the misspelt variable at start', async () => {
    service = await startServiceProcess({ MQTT_PROT: '1884' });
    const warning = service.logs.find((entry) => entry.variable === 'MQTT_PROT');
    expect(warning).toMatchObject({ resembles: 'MQTT_PORT', msg: expect.stringContaining('did you mean MQTT_PORT?') });
  });

  it('health: exit 0 against a ready bridge, on HTTP_PORT or --url', async () => {
    harness = await startHarness();
    const port = String(harness.bridge.httpPort);
    const byEnv = await cli(['health'], { HTTP_PORT: port });
    expect(byEnv.code).toBe(0);
    expect(byEnv.stdout).toMatch(/^ready/);
    expect((await cli(['health', '--url', `http://127.0.0.1:${port}`])).code).toBe(0);
  });

  it('health: exit 1 with the reasons when not ready', async () => {
    server = createServer((_, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ ready: false, listening: true, store: 'redis', storeReachable: false, broker: 'embedded', brokerConnected: true, providers: [] }),
      );
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const { code, stdout } = await cli(['health', '--url', `http://127.0.0.1:${port}`]);
    expect(code).toBe(1);
    expect(stdout).toContain('store (redis) unreachable');
  });

  it('health: exit 1 with a message when nothing listens', async () => {
    const port = await closedPort();
    const { code, stderr } = await cli(['health', '--url', `http://127.0.0.1:${port}`]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/cannot connect.*ECONNREFUSED/);
  });
});
