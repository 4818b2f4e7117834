// The folders' import rules, read from the source. Top level: contract/ imports no other
// folder of ours, broker/ nothing but contract/, and no two folders import each other. Inside
// bridge/, the stages follow a request (mqtt → intake → scheduling → coalescing → upstream →
// results → scada) and never import an earlier stage; model/, store/, config/, recovery/ and ops/
// sit beside, model/ (the request's data) under every other one, ops/'s own sub-folders in no
// circle either. No file imports itself around a circle, and the service's entry loads no simulator.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sourceFiles, sourceFolders } from '../helpers/code-shape.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FOLDERS = sourceFolders(ROOT);
const STAGES = ['mqtt', 'intake', 'scheduling', 'coalescing', 'upstream', 'results', 'scada'];
const BESIDE = ['model', 'store', 'config', 'recovery', 'ops'];
/** bridge/ root files a subfolder may import; the rest (main, app, coordination…) only wire. */
const SHARED_ROOT_FILES = ['logger.ts', 'repeating-log.ts', 'version.ts'];

/** [importing file, imported file], both relative to `base`, for every relative import under `dir`. */
function imports(dir: string, base: string): Array<[string, string]> {
  // Static, dynamic (`import('./x.js')`) and side-effect (`import './x.js'`) imports alike.
  return sourceFiles(dir, ['.']).flatMap((file) =>
    [...readFileSync(file, 'utf8').matchAll(/(?:from\s*|import\s*\(?\s*)'(\.[^']+)'/g)].map(
      (m) => [relative(base, file), relative(base, resolve(dirname(file), (m[1] as string).replace(/\.js$/, '.ts')))] as [string, string],
    ),
  );
}

/** Folder → the other folders its files import (the first path segment under `base`). */
function folderEdges(dir: string, base: string, folders: string[]): Map<string, Set<string>> {
  const edges = new Map<string, Set<string>>(folders.map((f) => [f, new Set<string>()]));
  for (const [from, to] of imports(dir, base)) {
    const source = from.split('/')[0] as string;
    const target = to.split('/')[0] as string;
    if (source !== target && folders.includes(source) && folders.includes(target)) edges.get(source)?.add(target);
  }
  return edges;
}

function circles(edges: Map<string, Set<string>>): string[] {
  const reaches = (from: string, to: string, seen = new Set<string>()): boolean =>
    [...(edges.get(from) ?? [])].some((next) => next === to || (!seen.has(next) && (seen.add(next), reaches(next, to, seen))));
  return [...edges.keys()].filter((folder) => reaches(folder, folder));
}

describe('folder layering', () => {
  const edges = folderEdges(ROOT, ROOT, FOLDERS);

  it('keeps contract/ free of every other folder, and broker/ free of bridge/ and the simulators', () => {
    expect([...(edges.get('contract') ?? [])]).toEqual([]);
    expect([...(edges.get('broker') ?? [])].sort()).toEqual(['contract']);
  });

  it('has no two folders importing each other, directly or around a circle', () => {
    expect(circles(edges)).toEqual([]);
  });

  it("keeps client/ on contract/ alone, and at run time on mqtt and the contract's names only: device code installs nothing more", () => {
    expect([...(edges.get('client') ?? [])]).toEqual(['contract']);
    const runtime = sourceFiles(join(ROOT, 'client'), ['.']).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/^(?:import|export) (?!type )[^;]*?from '([^']+)'/gm)].map((m) => m[1] as string),
    );
    expect(runtime.length).toBeGreaterThan(0);
    expect(runtime.filter((target) => !target.startsWith('./') && !target.startsWith('node:') && !['mqtt', '../contract/names.js'].includes(target))).toEqual(
      [],
    );
  });

  it('keeps scada-sim/ on contract/ alone: it reads what SCADA reads, as an outside host would', () => {
    expect(FOLDERS).toContain('scada-sim');
    expect([...(edges.get('scada-sim') ?? [])]).toEqual(['contract']);
  });
});

/** Strongly connected groups of more than one file (Tarjan): each is a circle of imports. */
function fileCycles(edges: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file) as number);
    stack.push(file);
    for (const next of edges.get(file) ?? []) {
      if (!edges.has(next)) continue;
      if (!index.has(next)) visit(next);
      if (stack.includes(next)) low.set(file, Math.min(low.get(file) as number, low.get(next) as number));
    }
    if (low.get(file) !== index.get(file)) return;
    const group = stack.splice(stack.indexOf(file));
    if (group.length > 1) cycles.push(group.sort());
  };
  for (const file of edges.keys()) if (!index.has(file)) visit(file);
  return cycles;
}

describe('file imports', () => {
  const all = imports(ROOT, ROOT);
  const edges = new Map<string, string[]>();
  for (const [from, to] of all) edges.set(from, [...(edges.get(from) ?? []), to]);
  for (const file of sourceFiles(ROOT, [...FOLDERS, 'test'])) if (!edges.has(relative(ROOT, file))) edges.set(relative(ROOT, file), []);

  it('has no file importing itself around a circle (static, dynamic and type-only imports alike)', () => {
    expect(fileCycles(edges)).toEqual([]);
  });

  it('keeps the service entry (bridge/main.ts) and all it loads free of the simulators', () => {
    const loaded = new Set<string>(['bridge/main.ts']);
    for (const file of loaded) for (const next of edges.get(file) ?? []) loaded.add(next);
    expect([...loaded].filter((file) => !['bridge', 'broker', 'contract'].includes(file.split('/')[0] as string))).toEqual([]);
  });

  it('lets the rest of the code use broker/ only through the broker, its cluster plugins and its AUTH_FILE', () => {
    const used = all.filter(([from, to]) => !from.startsWith('broker/') && !from.startsWith('test/') && to.startsWith('broker/')).map(([, to]) => to);
    expect([...new Set(used)].sort()).toEqual(['broker/auth.ts', 'broker/broker.ts', 'broker/cluster.ts']);
  });

  it("leaves the defaults of the broker's limits to the bridge's schema: broker/ fills in no config value", () => {
    const filled = sourceFiles(ROOT, ['broker']).flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/\bconfig\.(\w+)\s*\?\?/g)].map((m) => `${relative(ROOT, file)}: ${m[1]}`),
    );
    expect(filled).toEqual([]);
  });
});

describe('bridge/ layering', () => {
  const bridge = join(ROOT, 'bridge');
  const subfolders = readdirSync(bridge).filter((name) => statSync(join(bridge, name)).isDirectory());
  const edges = folderEdges(bridge, bridge, subfolders);
  const importsOf = (folder: string): string[] => [...(edges.get(folder) ?? [])].sort();

  it('has every subfolder placed as a stage or beside the stages', () => {
    expect(subfolders.filter((f) => !STAGES.includes(f) && !BESIDE.includes(f))).toEqual([]);
  });

  it('never imports an earlier stage of the request', () => {
    const backwards = STAGES.flatMap((stage, i) =>
      importsOf(stage)
        .filter((t) => STAGES.indexOf(t) >= 0 && STAGES.indexOf(t) < i)
        .map((t) => `${stage} → ${t}`),
    );
    expect(backwards).toEqual([]);
  });

  it('keeps model/ on the contract alone, store/ on model/ alone, config/ on nothing, and every stage free of ops/', () => {
    expect(importsOf('model')).toEqual([]);
    expect(importsOf('store')).toEqual(['model']);
    expect(importsOf('config')).toEqual([]);
    expect(STAGES.filter((stage) => importsOf(stage).includes('ops'))).toEqual([]);
  });

  it("keeps the stages off the store's implementations: upstream/ owns its breaker port, and the root wires the Redis one", () => {
    expect(importsOf('upstream')).not.toContain('store');
  });

  it('has no subfolders importing each other around a circle', () => {
    expect(circles(edges)).toEqual([]);
  });

  it('has no subfolders of ops/ importing each other around a circle', () => {
    const ops = join(bridge, 'ops');
    const parts = readdirSync(ops).filter((name) => statSync(join(ops, name)).isDirectory());
    expect(parts).toContain('admin');
    expect(circles(folderEdges(ops, ops, parts))).toEqual([]);
  });

  it('lets subfolders import from bridge/ itself only the shared logger and version', () => {
    const wiring = imports(bridge, bridge).filter(
      ([from, to]) => from.includes('/') && !to.includes('/') && !to.startsWith('..') && !SHARED_ROOT_FILES.includes(to),
    );
    expect(wiring).toEqual([]);
  });
});
