// The documented form of the package's own commands, `npm run NAME -- ARGS`, run as a user runs
// it after `npm install` (build first: `npm run build`): each answers --help from the build
// already there, with an empty npm cache that must stay without an npx install (`_npx/`), and
// nothing in dist/ is written again. `npx NAME` here fails both: npm installs the project
// into _npx/ and runs `prepare`, the whole build.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string; bin: Record<string, string> };
const home = mkdtempSync(join(tmpdir(), 'eab-npm-'));
const cache = join(home, 'cache');
afterAll(() => rmSync(home, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `npm ARGS` in the repository, with a home and cache of its own (no user .npmrc, no earlier npx install). */
function npm(args: string[]): Promise<Run> {
  return new Promise((done, fail) => {
    const env = { PATH: process.env.PATH ?? '', HOME: home, npm_config_cache: cache, npm_config_update_notifier: 'false' };
    const child = spawn('npm', args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', fail);
    child.on('exit', (code) => done({ code, stdout, stderr }));
  });
}

const mtimes = (): number[] => Object.values(pkg.bin).map((file) => statSync(join(ROOT, file)).mtimeMs);

describe('documented commands', () => {
  it('npm run NAME -- --help answers from the build there, without installing or building anything', async () => {
    const before = mtimes();
    for (const [name, file] of Object.entries(pkg.bin)) {
      expect(existsSync(join(ROOT, file)), `${file} (npm run build first)`).toBe(true);
      const { code, stdout, stderr } = await npm(['run', '-s', name, '--', '--help']);
      expect(code, `${name}: ${stderr}`).toBe(0);
      const usage = name === 'edge-ai-bridge' ? `edge-ai-bridge ${pkg.version}\n\nusage: edge-ai-bridge` : `usage: ${name} `;
      expect(stdout.startsWith(usage), `${name}: ${stdout.slice(0, 80)}`).toBe(true);
    }
    expect(existsSync(join(cache, '_npx')), 'an npx install in the npm cache').toBe(false);
    expect(mtimes()).toEqual(before);
  }, 60_000);

  it('passes what follows -- to the command, and -s leaves only its output', async () => {
    const { code, stdout } = await npm(['run', '-s', 'edge-ai-bridge', '--', '--version']);
    expect(code).toBe(0);
    expect(stdout).toBe(`${pkg.version}\n`);
    const check = await npm(['run', '-s', 'edge-ai-bridge', '--', 'check']);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toMatch(/^configuration ok/);
  }, 30_000);
});
