// The SCADA outputs on /metrics: with UNS and Sparkplug on, a device's typed answer counts in
// edge_ai_bridge_scada_answers_total and the one instance (alone here) reports it publishes the
// Edge Node; with both off, the counters stay 0 and no instance publishes.
import { writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { okOf, startHarness, type Harness } from '../helpers/harness.js';
import { tempDir } from '../helpers/security.js';

const INSPECT = {
  messages: [{ role: 'user', content: 'Part {{part}}: reject?' }],
  output: { type: 'object', properties: { reject: { type: 'boolean' } }, required: ['reject'] },
};

const dir = tempDir('eab-scada-metrics-');
afterAll(() => dir.remove());
let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const metrics = async (harness: Harness): Promise<string> => (await fetch(`http://127.0.0.1:${harness.bridge.httpPort}/metrics`)).text();
const value = (text: string, name: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

describe('SCADA metrics', () => {
  it('counts answers handed to UNS and Sparkplug, and shows this instance publishing the Edge Node', async () => {
    const path = `${dir.path}/on.json`;
    writeFileSync(path, JSON.stringify({ templates: { inspect: INSPECT }, uns: { root: 'acme/plant-1', devices: {} } }));
    h = await startHarness({ CONFIG_FILE: path, SPARKPLUG_GROUP_ID: 'plant', SPARKPLUG_EDGE_NODE_ID: 'metrics-test' });
    const press = await h.device('press-1');
    await press.publish('normal', { id: 'r1', template: 'inspect', vars: { part: 'A7' } });
    expect(okOf((await press.reply('r1'))[0]).data).toEqual({ reject: true });
    const harness = h;
    let text = '';
    for (let i = 0; i < 50 && value(text, 'edge_ai_bridge_scada_answers_total') !== 1; i += 1) {
      text = await metrics(harness);
      if (value(text, 'edge_ai_bridge_scada_answers_total') !== 1) await new Promise((r) => setTimeout(r, 50));
    }
    expect(value(text, 'edge_ai_bridge_scada_answers_total')).toBe(1);
    expect(value(text, 'edge_ai_bridge_scada_failures_total')).toBe(0);
    expect(value(text, 'edge_ai_bridge_sparkplug_publishing')).toBe(1);
  });

  it('counts nothing while UNS and Sparkplug are off, and shows no Edge Node', async () => {
    h = await startHarness({});
    const press = await h.device('press-1');
    await press.publish('normal', { id: 'r1', messages: [{ role: 'user', content: 'hello' }] });
    expect((await press.reply('r1'))[0]?.ok).toBe(true);
    const text = await metrics(h);
    expect(value(text, 'edge_ai_bridge_scada_answers_total')).toBe(0);
    expect(value(text, 'edge_ai_bridge_sparkplug_publishing')).toBe(0);
  });
});
