// docs/security.md's role table and the README's topic rules say what broker/acl.ts grants:
// each role's publish topics and subscription filters, no more and no fewer; the Mosquitto
// ACL of docs/plant-broker.md is the one the plant's-broker tests run with.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { publishPatterns, subscribePatterns, type Identity, type Role } from '../../broker/acl.js';
import { PLANT_ACL } from '../helpers/mosquitto.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const DEVICE = 'cam-1';
const ROOT_TOPIC = 'acme/plant-1';

const identity = (role: Role): Identity => ({ role, deviceId: role === 'device' ? DEVICE : undefined });

/** The code spans of a piece of Markdown outside parentheses (remarks), placeholders filled in. */
const spans = (text: string): string[] =>
  [...text.replace(/\([^)]*\)/g, '').matchAll(/`([^`]+)`/g)].map((m) =>
    (m[1] as string).replaceAll('{own id}', DEVICE).replaceAll('{ownId}', DEVICE).replaceAll('{uns root}', ROOT_TOPIC),
  );

/** role → [publish, subscribe] from the `| role | may publish | may subscribe |` table. */
function roleTable(markdown: string): Map<string, [string[], string[]]> {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => l.startsWith('| role | may publish | may subscribe |'));
  expect(start, 'a role table').toBeGreaterThanOrEqual(0);
  const rows = new Map<string, [string[], string[]]>();
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [role, publish, subscribe] = line.split(' | ').map((cell) => cell.replace(/^\| |\|$/g, ''));
    rows.set(spans(role ?? '')[0] ?? '', [spans(publish ?? ''), spans(subscribe ?? '')]);
  }
  return rows;
}

describe('role docs', () => {
  it('docs/security.md lists exactly what each role may publish and subscribe', () => {
    const table = roleTable(read('docs/security.md'));
    expect([...table.keys()].sort()).toEqual(['device', 'observer', 'operator']);
    for (const [role, [publish, subscribe]] of table) {
      const who = identity(role as Role);
      expect(publish.sort(), `${role} publish`).toEqual([...publishPatterns(who)].sort());
      expect(subscribe.sort(), `${role} subscribe`).toEqual([...subscribePatterns(who, [`${ROOT_TOPIC}/#`])].sort());
    }
  });

  it("the README's topic rules give a device what the broker does", () => {
    const sentence = /A device may publish only (.*?), and subscribe only within (.*?)\. /s.exec(read('README.md'));
    expect(sentence, 'the README sentence on device topics').not.toBeNull();
    const device = identity('device');
    expect(spans(sentence?.[1] ?? '').sort()).toEqual([...publishPatterns(device)].sort());
    expect(spans(sentence?.[2] ?? '').sort()).toEqual([...subscribePatterns(device, [])].sort());
  });

  it("docs/plant-broker.md's Mosquitto ACL, with its observer, is the one the tests run", () => {
    const doc = read('docs/plant-broker.md');
    const block = /\*\*Mosquitto 2\.0\*\* \(`password_file`[\s\S]*?```\n([\s\S]*?)```/.exec(doc)?.[1] ?? '';
    const lines = block.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
    expect(lines).toEqual([...PLANT_ACL]);
    expect(lines).toContain('user scada');
  });
});
