// The user-facing docs say what the code does: the error tables list exactly the contract's
// codes, the documented MQTT 5 PUBACK reason of each code is the one the bridge sends, and
// the configuration table lists exactly the variables the bridge reads.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { VARIABLES } from '../../bridge/config/config.js';
import { ERROR_CODES, pubackReasonOf } from '../../contract/index.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string): string => readFileSync(resolve(ROOT, path), 'utf8');

/** The codes in the first column of the Markdown table under a `| error code | when |` header. */
function errorTable(markdown: string): string[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((l) => /^\| error code \| when \|/.test(l));
  expect(start, 'an error-code table').toBeGreaterThanOrEqual(0);
  const codes: string[] = [];
  for (const line of lines.slice(start + 2)) {
    const match = /^\| `([a-z_]+)` \|/.exec(line);
    if (!match) break;
    codes.push(match[1] as string);
  }
  return codes;
}

describe('docs', () => {
  it('list exactly the contract error codes in the README and in docs/CONTRACT.md', () => {
    expect(errorTable(read('README.md')).sort()).toEqual([...ERROR_CODES].sort());
    expect(errorTable(read('docs/CONTRACT.md')).sort()).toEqual([...ERROR_CODES].sort());
  });

  it('give each code the MQTT 5 PUBACK reason the bridge sends', () => {
    const contract = read('docs/CONTRACT.md');
    const documented: Array<[string[], number]> = [
      [['rate_limited', 'budget_exceeded'], 0x97],
      [['invalid_request', 'payload_too_large'], 0x99],
      [['queue_full', 'unavailable', 'internal'], 0x83],
    ];
    for (const [codes, reason] of documented) {
      // e.g. "`invalid_request`, `payload_too_large` → 0x99"
      const hex = `0x${reason.toString(16)}`;
      expect(contract).toMatch(new RegExp(`${codes.map((c) => `\`${c}\``).join('[^→]*')}[^→]*→ ${hex}`));
      for (const code of codes) expect(pubackReasonOf(code as (typeof ERROR_CODES)[number]), code).toBe(reason);
    }
  });

  it('list every variable the bridge reads, and no other, in the configuration table', () => {
    const table = read('docs/configuration.md').split('\n## ')[1] ?? '';
    const rows = table.split('\n').filter((line) => line.startsWith('| `'));
    const documented = rows.flatMap((row) => [...(row.split(' | ')[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1] as string));
    expect(documented.sort()).toEqual([...VARIABLES].sort());
  });
});
