// Fair-share weights from CONFIG_FILE: a device's own entry, then the first matching pattern,
// else 1; bad entries refused at start by name; and the charge a request makes.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../bridge/config/config.js';
import { fairCharge, weightOf } from '../../bridge/config/fair-share.js';

const dir = mkdtempSync(join(tmpdir(), 'weights-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function configWith(file: unknown): ReturnType<typeof loadConfig> {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(file));
  return loadConfig({ CONFIG_FILE: path });
}

describe('fair-share weights', () => {
  it("takes a device's own weight, else the first pattern it matches, else 1", () => {
    const { weights } = configWith({ weights: { 'cam-7': 3, 'cam-*': 2, '*-test': 0.5, 'line4.plc': 4 } }).file;
    expect(weightOf(weights, 'cam-7')).toBe(3);
    expect(weightOf(weights, 'cam-12')).toBe(2);
    expect(weightOf(weights, 'cam-test')).toBe(2); // cam-* comes first in the file
    expect(weightOf(weights, 'x-test')).toBe(0.5);
    expect(weightOf(weights, 'line4.plc')).toBe(4);
    expect(weightOf(weights, 'line4-plc')).toBe(1); // a dot is a dot, not any character
    expect(weightOf({}, 'anyone')).toBe(1);
  });

  it('refuses a weight that is not positive and a key that is no device id or pattern, by name', () => {
    expect(() => configWith({ weights: { 'cam-*': 0 } })).toThrow(/weights\.cam-\*: .*/);
    expect(() => configWith({ weights: { 'cam/7': 2 } })).toThrow(/weights\.cam\/7: a device id, or a pattern/);
  });

  it('charges tokens in + 2 × tokens out, over the weight', () => {
    expect(fairCharge(100, 50, 1)).toBe(200);
    expect(fairCharge(100, 50, 2)).toBe(100);
  });
});
