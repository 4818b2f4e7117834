// The folders' import rules, read from the source: contract/ imports no other folder of
// ours, broker/ nothing of bridge/ or device-sim/, and no two folders import each other.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FOLDERS = ['contract', 'broker', 'bridge', 'device-sim', 'bench'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Folder → the other folders of ours its files import. */
function folderImports(): Map<string, Set<string>> {
  const edges = new Map<string, Set<string>>();
  for (const folder of FOLDERS) {
    const targets = new Set<string>();
    for (const file of sourceFiles(join(ROOT, folder))) {
      for (const match of readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
        const target = relative(ROOT, resolve(dirname(file), match[1] as string)).split('/')[0] as string;
        if (target !== folder && FOLDERS.includes(target)) targets.add(target);
      }
    }
    edges.set(folder, targets);
  }
  return edges;
}

describe('folder layering', () => {
  const edges = folderImports();

  it('keeps contract/ free of every other folder, and broker/ free of bridge/ and device-sim/', () => {
    expect([...(edges.get('contract') ?? [])]).toEqual([]);
    expect([...(edges.get('broker') ?? [])].sort()).toEqual(['contract']);
  });

  it('has no two folders importing each other, directly or around a circle', () => {
    const reaches = (from: string, to: string, seen = new Set<string>()): boolean =>
      [...(edges.get(from) ?? [])].some((next) => next === to || (!seen.has(next) && (seen.add(next), reaches(next, to, seen))));
    const circles = FOLDERS.filter((folder) => reaches(folder, folder));
    expect(circles).toEqual([]);
  });
});
