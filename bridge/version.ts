import { readFileSync } from 'node:fs';

// Read at run time so the status topic always names the installed version. The file sits
// one level deeper once compiled (dist/bridge/), so both places are tried.
function readVersion(): string {
  for (const path of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'edge-ai-bridge' && pkg.version) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return '0.0.0';
}

export const VERSION: string = readVersion();
