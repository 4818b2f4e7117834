// The page's scripts take the elements they look up by id as present (static/dom.js byId is
// typed so): every id they name must be in index.html.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const STATIC = resolve(dirname(fileURLToPath(import.meta.url)), '../../bridge/ops/dashboard/static');

describe('dashboard page', () => {
  it('has in index.html every id its scripts look up', () => {
    const html = readFileSync(join(STATIC, 'index.html'), 'utf8');
    const ids = new Set([...html.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]));
    const scripts = readdirSync(STATIC).filter((name) => name.endsWith('.js'));
    const named = scripts.flatMap((name) =>
      [...readFileSync(join(STATIC, name), 'utf8').matchAll(/\b(?:byId|setText|show)\('([^']+)'/g)].map((m) => m[1] as string),
    );
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((id) => !ids.has(id))).toEqual([]);
  });
});
