// One configuration file as an operator uses it: the shipped example passes `check`, `config`
// shows where each value came from, and the service started on a YAML file takes its settings,
// says what it loaded, and on SIGHUP says which settings wait for a restart. Runs the compiled
// command (build first: `npm run build`).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { waitUntil } from '../helpers/wait.js';

const CLI = fileURLToPath(new URL('../../dist/bridge/cli.js', import.meta.url));
const EXAMPLE = fileURLToPath(new URL('../../deploy/edge-ai-bridge.example.yaml', import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const dir = mkdtempSync(join(tmpdir(), 'config-file-e2e-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The text table's row of a variable: its value and source columns. */
function row(stdout: string, variable: string): { value: string; source: string } | undefined {
  const line = stdout.split('\n').find((l) => l.startsWith(`${variable} `));
  const match = line === undefined ? null : /^\S+\s+(\S+)\s+(.+)$/.exec(line);
  return match ? { value: match[1] as string, source: match[2] as string } : undefined;
}

describe('deploy/edge-ai-bridge.example.yaml', () => {
  it('passes check', async () => {
    const { code, stdout, stderr } = await cli(['check'], { CONFIG_FILE: EXAMPLE });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^configuration ok\n/);
    expect(stdout).toContain('CONFIG_FILE 1 templates, 1 weights, 2 budgets, 1 providers, 11 settings');
  });

  it('config: the environment over the file, the file over the default, secrets redacted', async () => {
    const env = { CONFIG_FILE: EXAMPLE, MQTT_PORT: '18999', ADMIN_TOKEN: 'env-admin-token-0123456789' };
    const text = await cli(['config'], env);
    expect(text.code).toBe(0);
    expect(row(text.stdout, 'MQTT_PORT')).toEqual({ value: '18999', source: "environment (over the file's)" });
    expect(row(text.stdout, 'HTTP_PORT')).toEqual({ value: '9464', source: `file (${EXAMPLE}:22:14)` });
    expect(row(text.stdout, 'QUEUE_MAX')).toEqual({ value: '10000', source: 'default' });
    expect(row(text.stdout, 'ADMIN_TOKEN')).toEqual({ value: '<redacted>', source: 'environment' });
    expect(text.stdout).toContain(`CONFIG_FILE ${EXAMPLE} (yaml): 1 templates, 1 weights, 2 budgets, 1 providers, 11 settings`);

    const json = await cli(['config', '--json'], env);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as { variables: Array<{ variable: string; value: string; source: string }>; file: { templates: object } };
    const sources = Object.fromEntries(report.variables.map((e) => [e.variable, e.source]));
    expect(sources).toMatchObject({ MQTT_PORT: 'environment', HTTP_PORT: 'file', UPSTREAM_MODEL: 'file', QUEUE_MAX: 'default', CONFIG_FILE: 'environment' });
    expect(Object.keys(report.file.templates)).toEqual(['defect-check']);
    expect(text.stdout + json.stdout).not.toContain('env-admin-token');
  });

  it('config: exit 2 naming an unknown setting and the variable it resembles', async () => {
    const path = join(dir, 'typo.yaml');
    writeFileSync(path, 'settings:\n  # the port\n  MQTT_PROT: 1884\n');
    const { code, stdout, stderr } = await cli(['config'], { CONFIG_FILE: path });
    expect(code).toBe(2);
    expect(stdout).toBe('');
    expect(stderr).toBe(`edge-ai-bridge: CONFIG_FILE: ${path}:3:3: settings.MQTT_PROT: not a variable the bridge reads: did you mean MQTT_PORT?\n`);
  });
});

describe('the service on a YAML CONFIG_FILE', () => {
  let service: ServiceProcess | undefined;
  afterEach(async () => {
    await service?.stop('SIGKILL');
    service = undefined;
  });

  it('takes its settings, logs what it loaded, and names settings changed on SIGHUP as waiting for a restart', async () => {
    const path = join(dir, 'service.yaml');
    const token = 'file-admin-token-0123456789';
    writeFileSync(
      path,
      `settings:\n  ADMIN_TOKEN: ${token}   # from the file\n  MQTT_PORT: 1\ntemplates:\n  t:\n    messages: [{ role: user, content: hi }]\n`,
    );
    // The harness sets MQTT_PORT and HTTP_PORT to 0 in the environment: they win over the file.
    service = await startServiceProcess({ CONFIG_FILE: path });
    const loaded = service.logs.find((e) => String(e.msg).startsWith('CONFIG_FILE loaded'));
    expect(loaded).toMatchObject({
      msg: 'CONFIG_FILE loaded: 1 templates, 0 weights, 0 budgets, 0 providers, 2 settings; the environment overrides MQTT_PORT',
      configFile: path,
      templates: 1,
      settings: 2,
      overridden: ['MQTT_PORT'],
    });
    expect(JSON.stringify(service.logs)).not.toContain(token);

    // The file's ADMIN_TOKEN guards the operator API.
    const usage = (bearer: string) => fetch(`http://127.0.0.1:${service!.httpPort}/v1/usage`, { headers: { authorization: `Bearer ${bearer}` } });
    expect((await usage(token)).status).toBe(200);
    expect((await usage('another-token-0123456789')).status).toBe(401);

    writeFileSync(
      path,
      `settings:\n  ADMIN_TOKEN: ${token}\n  MQTT_PORT: 1\n  LOG_LEVEL: debug\ntemplates:\n  t:\n    messages: [{ role: user, content: hi }]\n`,
    );
    service.child.kill('SIGHUP');
    const restart = 'CONFIG_FILE: settings (LOG_LEVEL) changed, which a running bridge does not take: restart it to apply them';
    expect(await waitUntil(() => service!.logs.some((e) => e.msg === restart), 5000, 20)).toBe(true);
    expect(service.logs.some((e) => e.level === 20)).toBe(false);
  });
});
