// deploy/systemd/: the unit files run node on the built entry (not npm, which would take the
// SIGTERM itself), restart always, keep a stable INSTANCE_ID, raise the open-files limit, give
// the bridge time to drain, and pass `systemd-analyze verify`; the example environment file
// is one the bridge starts with.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../broker/auth.js';
import { loadConfig, VARIABLES } from '../../bridge/config/config.js';
import { EnvSchema } from '../../bridge/config/variables.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DIR = join(ROOT, 'deploy/systemd');
const UNITS = readdirSync(DIR).filter((name) => name.endsWith('.service'));
const read = (name: string): string => readFileSync(join(DIR, name), 'utf8');
const tmp = mkdtempSync(join(tmpdir(), 'eab-systemd-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Every `Key=value` of a unit file, in order (a key may repeat: Environment=). */
function settings(text: string): Array<[string, string]> {
  return text.split('\n').flatMap((line) => {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    return m ? [[m[1] as string, m[2] as string] as [string, string]] : [];
  });
}
const values = (text: string, key: string): string[] => settings(text).flatMap(([k, v]) => (k === key ? [v] : []));
const one = (text: string, key: string): string | undefined => values(text, key)[0];

/** An EnvironmentFile's VARIABLE=value lines. */
function envFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1] as string] = m[2] as string;
  }
  return env;
}

const hasAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

describe('systemd units', () => {
  it('exist: one instance per host and a template for several', () => {
    expect(UNITS.sort()).toEqual(['edge-ai-bridge.service', 'edge-ai-bridge@.service']);
  });

  it.each(UNITS)("%s runs node on the service entry (npm start's, less the simulator), never npm", (name) => {
    const unit = read(name);
    const start = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(start).toBe('node dist/bridge/main-with-simulator.js');
    expect(one(unit, 'ExecStart')).toBe('/usr/bin/node /opt/edge-ai-bridge/dist/bridge/main.js');
    expect(unit).not.toMatch(/^Exec\w*=.*\bnpm\b/m);
    expect(one(unit, 'KillSignal')).toBe('SIGTERM');
  });

  it.each(UNITS)('%s restarts always, never gives up, raises the open-files limit and waits for the drain', (name) => {
    const unit = read(name);
    expect(one(unit, 'Restart')).toBe('always');
    expect(one(unit, 'StartLimitIntervalSec')).toBe('0');
    expect(Number(one(unit, 'LimitNOFILE'))).toBeGreaterThanOrEqual(65_536);
    const graceS = EnvSchema.shape.SHUTDOWN_GRACE_MS.parse(undefined) / 1000;
    expect(Number(one(unit, 'TimeoutStopSec'))).toBeGreaterThan(graceS);
  });

  it.each(UNITS)('%s sets a stable INSTANCE_ID from the host (and instance) name, and reads an environment file', (name) => {
    const unit = read(name);
    const id = values(unit, 'Environment').find((v) => v.startsWith('INSTANCE_ID='));
    expect(id).toBe(name.includes('@') ? 'INSTANCE_ID=%l-%i' : 'INSTANCE_ID=%l');
    expect(one(unit, 'EnvironmentFile')).toMatch(/^\/etc\/edge-ai-bridge\/(edge-ai-bridge|%i)\.env$/);
  });

  it.skipIf(!hasAnalyze)('pass systemd-analyze verify', () => {
    for (const name of UNITS) {
      // An instance of the template; node wherever this machine has it (verify checks the executable).
      const copy = join(tmp, name.replace('@.', '@a.'));
      writeFileSync(copy, read(name).replaceAll('/usr/bin/node', process.execPath));
      const run = spawnSync('systemd-analyze', ['verify', copy], { encoding: 'utf8' });
      expect(`${run.status} ${run.stderr}`.trim(), name).toBe('0');
    }
  });

  it.skipIf(!hasAnalyze)('systemd-analyze verify refuses a broken unit (the check above can fail)', () => {
    const broken = join(tmp, 'broken.service');
    writeFileSync(broken, read('edge-ai-bridge.service').replace('Restart=always', 'Restart=alwayz').replaceAll('/usr/bin/node', process.execPath));
    // A bad value is only warned about (exit 0): the check above wants no output at all.
    const run = spawnSync('systemd-analyze', ['verify', broken], { encoding: 'utf8' });
    expect(run.stderr).toContain('alwayz');
  });
});

describe('the example environment file', () => {
  it('sets only variables the bridge reads, and the bridge starts with it', async () => {
    const env = envFile(read('edge-ai-bridge.env'));
    expect(Object.keys(env).length).toBeGreaterThan(3);
    for (const variable of Object.keys(env)) expect(VARIABLES, variable).toContain(variable);
    const auth = join(tmp, 'auth.json');
    writeFileSync(auth, JSON.stringify({ users: [{ username: 'cam-1', password_hash: await hashPassword('pw'), role: 'device', device_id: 'cam-1' }] }));
    expect(env.AUTH_FILE).toBe('/etc/edge-ai-bridge/auth.json');
    expect(() => loadConfig({ ...env, AUTH_FILE: auth })).not.toThrow();
  });
});
