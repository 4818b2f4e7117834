// The commands the README and docs show run in a fresh clone right after `npm install`, without
// building again. `npx NAME` inside the package that declares NAME in `bin` makes npm install the
// package itself into its npx cache, which runs `prepare` (the whole build) and, interrupted,
// leaves a cache every later npx fails on; so the docs show `npm run NAME -- ARGS`, and each
// such script runs the built file directly. test/e2e/doc-commands.test.ts runs them.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as { bin: Record<string, string>; scripts: Record<string, string> };
const BINS = Object.keys(pkg.bin);

/** Every Markdown file a user reads: the README, docs/, the benchmark's README and notes, the changelog. */
export function userDocs(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`);
  return ['README.md', 'CHANGELOG.md', 'bench/README.md', 'bench/NOTES.md', ...docs];
}

interface Shown {
  file: string;
  script: string;
  /** What follows the script's name on that line of code. */
  rest: string;
}

/** Every `npm run [-s] SCRIPT …` in the code spans and code blocks of the docs. */
export function shownNpmRuns(): Shown[] {
  const shown: Shown[] = [];
  for (const file of userDocs()) {
    const code = [...read(file).matchAll(/```[^\n]*\n([\s\S]*?)```|`([^`\n]+)`/g)].map((m) => m[1] ?? m[2] ?? '');
    for (const line of code.flatMap((c) => c.split('\n'))) {
      for (const m of line.matchAll(/npm run (?:-s )?([a-z][a-z0-9:-]*)([^|&;)]*)/g))
        shown.push({ file, script: m[1] as string, rest: (m[2] ?? '').replace(/#.*$/, '').trim() });
    }
  }
  return shown;
}

describe('documented commands', () => {
  it("never run one of the package's own bins through npx or npm exec", () => {
    const own = new RegExp(`\\b(?:npx|npm exec)(?: [-\\w]+)* (?:-- )?(${BINS.join('|')})\\b`);
    for (const file of userDocs()) {
      const lines = read(file).split('\n');
      lines.forEach((line, i) => expect(own.exec(line)?.[0], `${file}:${i + 1}`).toBeUndefined());
    }
    for (const [name, script] of Object.entries(pkg.scripts)) expect(script, name).not.toMatch(/\bnpx\b|npm exec/);
  });

  it('have a script for each bin that runs its built file with node', () => {
    for (const [name, file] of Object.entries(pkg.bin)) {
      expect(pkg.scripts[name], name).toBe(`node ${file}`);
      // The file tsc writes it from: dist/x/cli.js comes from x/cli.ts.
      expect(existsSync(join(ROOT, file.replace(/^dist\//, '').replace(/\.js$/, '.ts'))), file).toBe(true);
    }
  });

  it('name scripts package.json has, and pass arguments after --', () => {
    const shown = shownNpmRuns();
    // The README's own examples, so the scan cannot silently find nothing.
    expect(shown.filter((s) => BINS.includes(s.script)).length).toBeGreaterThanOrEqual(10);
    const unknown = shown.filter(({ script }) => !Object.hasOwn(pkg.scripts, script));
    expect(unknown.map(({ file, script }) => `${file}: npm run ${script}`)).toEqual([]);
    // npm reads options before `--` as its own and would swallow them.
    const unguarded = shown.filter(({ rest }) => rest !== '' && !/^--(\s|$)/.test(rest));
    expect(unguarded.map(({ file, script, rest }) => `${file}: npm run ${script} ${rest}`)).toEqual([]);
  });
});
