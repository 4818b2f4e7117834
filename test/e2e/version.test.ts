// One version everywhere a user reads it: package.json, the running service's /readyz and
// retained status, `edge-ai-bridge --version`, the changelog's newest entry and the Versions
// note of docs/CONTRACT.md (build first: `npm run build`).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { StatusSchema } from '../../contract/index.js';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const VERSION = (JSON.parse(read('package.json')) as { version: string }).version;

/** `1.10.2` → [1, 10, 2], for comparing versions in order. */
const parts = (version: string): number[] => version.split('.').map(Number);

describe('version', () => {
  let service: ServiceProcess | undefined;
  afterEach(async () => {
    await service?.stop('SIGKILL');
    service = undefined;
  });

  it('is the one in package.json on /readyz, the retained status topic and --version', async () => {
    service = await startServiceProcess({ LOG_LEVEL: 'info' });
    const ready = (await (await fetch(`http://127.0.0.1:${service.httpPort}/readyz`)).json()) as { version?: string };
    expect(ready.version).toBe(VERSION);
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${service.mqttPort}`, { clientId: 'version-check', reconnectPeriod: 0 });
    try {
      const status = new Promise<Buffer>((done) => client.once('message', (_topic, payload) => done(payload)));
      await client.subscribeAsync('bridge/+/status', { qos: 1 });
      expect(StatusSchema.parse(JSON.parse((await status).toString())).version).toBe(VERSION);
    } finally {
      await client.endAsync(true);
    }
    const cli = spawnSync(process.execPath, [join(ROOT, 'dist/bridge/cli.js'), '--version'], { encoding: 'utf8' });
    expect(cli.stdout).toBe(`${VERSION}\n`);
  });

  it("is the changelog's newest entry, above the one before it", () => {
    const headings = [...read('CHANGELOG.md').matchAll(/^- (\d+\.\d+\.\d+)(?: \(unreleased\))?:/gm)].map((m) => m[1] as string);
    expect(headings[0]).toBe(VERSION);
    const [newest, previous] = [parts(headings[0] ?? ''), parts(headings[1] ?? '')];
    const cmp = newest.map((n, i) => n - (previous[i] ?? 0)).find((d) => d !== 0) ?? 0;
    expect(cmp, `${headings[0]} after ${headings[1]}`).toBeGreaterThan(0);
  });

  it('is the one the Versions note of docs/CONTRACT.md names', () => {
    const named = /^## Versions\n\nThis is contract v1 as edge-ai-bridge (\d+\.\d+) keeps it/m.exec(read('docs/CONTRACT.md'))?.[1];
    expect(named).toBe(VERSION.split('.').slice(0, 2).join('.'));
  });
});
