// scada-sim's text output: device-sent text cannot drive the terminal, ages read at a glance.
import { describe, expect, it } from 'vitest';
import type { Tag } from '../../scada-sim/check.js';
import { formatAge, formatEvent, formatTable } from '../../scada-sim/table.js';

const NOW = 1_700_000_000_000;
const tag = (over: Partial<Tag>): Tag => ({
  source: 'plant/edge/cam1',
  metric: 'AI/t/x',
  value: 1,
  type: 'Double',
  quality: 'good',
  timestampMs: NOW,
  ...over,
});

describe('scada-sim table', () => {
  it('prints one row per tag with its value, quality and age', () => {
    const lines = formatTable([tag({ value: 0.5, timestampMs: NOW - 90_000 })], NOW, false).split('\n');
    expect(lines[0]).toMatch(/^DEVICE +METRIC +VALUE +QUALITY AGE$/);
    expect(lines[1]).toMatch(/^plant\/edge\/cam1 +AI\/t\/x +0\.5 +good +1m$/);
  });

  it('replaces control characters of device text, so an escape sequence cannot reach the terminal', () => {
    const out = formatTable([tag({ value: 'ok\x1b[2J\x07', metric: 'm\nx' })], NOW, false);
    expect(out).not.toMatch(/[\x00-\x1f](?<!\n)/);
    expect(out).toContain('ok?[2J?');
    expect(formatEvent({ kind: 'message', topic: 'a/\x1b]0;t\x07', retained: true, bytes: 3 })).toBe('a/?]0;t? (retained) 3 bytes');
  });

  it('shows ages in seconds, minutes and hours', () => {
    expect([formatAge(-5), formatAge(59_000), formatAge(60_000), formatAge(7_200_000)]).toEqual(['0s', '59s', '1m', '2h']);
  });
});
