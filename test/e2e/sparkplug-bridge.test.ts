// The bridge with SPARKPLUG_GROUP_ID: its Edge Node on the embedded broker (a host application
// logs in as an operator, asks a rebirth by NCMD; a device's disconnect is its DDEATH) and on
// the plant's broker; and a device's template answer reaching SCADA as Sparkplug metrics, seen
// by the real scada-sim host (--check) as the bridge's primary host. Every session is also
// judged by the observer's checker.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ScadaAnswer } from '../../contract/index.js';
import { ask, startHarness, type Harness } from '../helpers/harness.js';
import { tempDir, writeAuthFile } from '../helpers/security.js';
import { scripted } from '../helpers/scripted-upstream.js';
import { eventually } from '../helpers/wait.js';
import { metricValue, observe, scadaSim, type Observer } from '../helpers/sparkplug-observer.js';

const GROUP = 'plant';
const NODE = 'line-4';
const SPARKPLUG = { SPARKPLUG_GROUP_ID: GROUP, SPARKPLUG_EDGE_NODE_ID: NODE };
const TEMPLATES = {
  inspect: {
    messages: [{ role: 'user', content: 'Part {{part}}: reject?' }],
    output: {
      type: 'object',
      properties: { reject: { type: 'boolean' }, score: { type: 'number' }, defects: { type: 'integer' }, label: { type: 'string' } },
      required: ['reject', 'score', 'defects', 'label'],
    },
  },
};

const dir = tempDir('eab-spb-');
const authFile = join(dir.path, 'auth.json');
const configFile = join(dir.path, 'config.json');
writeFileSync(configFile, JSON.stringify({ templates: TEMPLATES }));

const answer = (deviceId: string, requestId: string): ScadaAnswer => ({
  deviceId,
  template: 'inspect',
  requestId,
  quality: 'good',
  timestamp: Date.now(),
  latencyMs: 40,
  data: { reject: true, score: 0.25, defects: 2, label: 'burr' },
});

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

async function bridge(env: Record<string, string>, mode: 'embedded' | 'external'): Promise<{ h: Harness; host: Observer }> {
  await writeAuthFile(authFile, [{ username: 'scada', password: 'scada-pw', role: 'operator' }]);
  const h = await startHarness({ ...SPARKPLUG, CONFIG_FILE: configFile, ...(mode === 'embedded' ? { AUTH_FILE: authFile } : {}), ...env }, {}, undefined, {
    mode,
  });
  closers.push(() => h.close());
  const host = await observe(h.url, GROUP, mode === 'embedded' ? { username: 'scada', password: 'scada-pw' } : {});
  closers.push(() => host.close());
  return { h, host };
}

describe('the bridge as a Sparkplug Edge Node', () => {
  it('embedded broker: an operator asks a rebirth by NCMD; a device answered is born with typed metrics and dies when its connection closes', async () => {
    const { h, host } = await bridge({}, 'embedded');
    await host.rebirth(GROUP, NODE);
    const [nb] = await host.wait('NBIRTH');
    expect(nb!.topic).toBe(`spBv1.0/${GROUP}/NBIRTH/${NODE}`);
    const device = await h.device('cam-5');
    await h.bridge.scadaState.announce({ kind: 'answer', answer: answer('cam-5', 'r1') });
    const [db] = await host.wait('DBIRTH', 1, 'cam-5');
    expect(db!.metrics.find((m) => m.name === 'AI/inspect/defects')).toMatchObject({ type: 'Int64', value: 2 });
    expect(db!.metrics.find((m) => m.name === 'AI/inspect/score')).toMatchObject({ type: 'Double', value: 0.25 });
    await device.close();
    const [death] = await host.wait('DDEATH', 1, 'cam-5');
    expect(death!.seq).toBe(2);
    expect(host.violations()).toEqual([]);
  });

  it("plant's broker: the Edge Node's own connection answers a rebirth and births the devices answered", async () => {
    const { h, host } = await bridge({ INSTANCE_ID: 'spb-ext' }, 'external');
    await host.rebirth(GROUP, NODE);
    const [nb] = await host.wait('NBIRTH');
    expect(metricValue(nb!, 'bdSeq')).toBe(0);
    await h.bridge.scadaState.announce({ kind: 'answer', answer: answer('cam-6', 'r1') });
    const [db] = await host.wait('DBIRTH', 1, 'cam-6');
    expect(metricValue(db!, 'AI/inspect/label')).toBe('burr');
    expect(host.violations()).toEqual([]);
  });
});

describe('a device request reaching SCADA', () => {
  it.each(['embedded', 'external'] as const)('%s broker: a template answer becomes a DBIRTH with typed metrics, the next a DDATA', async (mode) => {
    const content = JSON.stringify({ reject: false, score: 0.75, defects: 0, label: 'clean' });
    const upstream = await scripted([
      {
        body: {
          id: 'c1',
          object: 'chat.completion',
          model: 'm',
          choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content } }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        },
      },
    ]);
    closers.push(() => upstream.close());
    const hostId = `scada-sim-${mode}`;
    const { h, host } = await bridge({ UPSTREAM_URL: upstream.url, INSTANCE_ID: `spb-${mode}`, SPARKPLUG_PRIMARY_HOST_ID: hostId }, mode);
    // The bridge waits for its primary host: scada-sim sees the session from its NBIRTH.
    const login = mode === 'embedded' ? ['--username', 'scada', '--password', 'scada-pw'] : [];
    const sim = await scadaSim(['--url', h.url, '--host-id', hostId, '--group', GROUP, '--check', ...login]);
    closers.push(() => sim.stop());
    await host.wait('NBIRTH');
    const device = await h.device('cam-7');
    await device.publish('normal', { id: 'q1', template: 'inspect', vars: { part: 'A1' } });
    await device.reply('q1');
    const [db] = await host.wait('DBIRTH', 1, 'cam-7');
    expect(db!.metrics.find((m) => m.name === 'AI/inspect/reject')).toMatchObject({ type: 'Boolean', value: false });
    expect(db!.metrics.find((m) => m.name === 'AI/inspect/defects')).toMatchObject({ type: 'Int64', value: 0 });
    expect(metricValue(db!, 'AI/inspect/requestId')).toBe('q1');
    await device.publish('normal', { ...ask('q2'), template: 'inspect', vars: { part: 'A2' }, messages: undefined });
    await device.reply('q2');
    const [dd] = await host.wait('DDATA', 1, 'cam-7');
    expect(dd!.metrics.every((m) => m.name === undefined)).toBe(true);
    expect(host.violations()).toEqual([]);

    await eventually('the DDATA at scada-sim', () => sim.output().includes(`spBv1.0/${GROUP}/DDATA/${NODE}/cam-7`));
    const { code, report } = await sim.stop();
    expect(code).toBe(0);
    expect(report?.first).toBeNull();
    const tags = new Map(report?.tags.filter((t) => t.source === `${GROUP}/${NODE}/cam-7`).map((t) => [t.metric, t]));
    expect(tags.get('AI/inspect/reject')).toMatchObject({ value: false, type: 'Boolean' });
    expect(tags.get('AI/inspect/defects')).toMatchObject({ value: 0, type: 'Int64' });
    expect(tags.get('AI/inspect/requestId')).toMatchObject({ value: 'q2', type: 'String' });
    // Its primary host gone offline, the bridge ends its session (NDEATH, the NBIRTH's bdSeq).
    const [death] = await host.wait('NDEATH');
    expect(metricValue(death!, 'bdSeq')).toBe(metricValue(host.of('NBIRTH')[0]!, 'bdSeq'));
    expect(host.violations()).toEqual([]);
  });
});
