// Prompt templates: a device names a CONFIG_FILE template and fills its vars; the bridge
// renders the prompt, and the upstream receives exactly that. Refusals name their cause, and
// SIGHUP re-reads the templates (a bad file keeps the ones in use). Asserted on what the
// device got and the upstream saw.
import { writeFileSync } from 'node:fs';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../contract/index.js';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { connectDevice, okOf, startHarness, type Device, type Harness } from '../helpers/harness.js';
import { tempDir } from '../helpers/security.js';
import { waitUntil } from '../helpers/wait.js';

const dir = tempDir('eab-templates-');
afterAll(() => dir.remove());

const DEFECT_CHECK = {
  messages: [
    { role: 'system', content: 'You inspect machined parts. Answer in JSON.' },
    { role: 'user', content: [{ type: 'text', text: 'Part {{part}}: burr height {{ mm }} mm. Reject over {{limit}} mm?' }] },
  ],
  model: 'vision-large',
  max_tokens: 64,
  temperature: 0,
  response_format: { type: 'json_object' },
  priority_route: { low: 'vision-small' },
};

function configFile(name: string, templates: Record<string, unknown>): string {
  const path = `${dir.path}/${name}.json`;
  writeFileSync(path, JSON.stringify({ templates }));
  return path;
}

const errorOf = (reply: Reply | undefined) => {
  if (reply === undefined || reply.ok) throw new Error(`expected an error reply, got ${JSON.stringify(reply)}`);
  return reply.error;
};

let h: Harness | undefined;
let service: ServiceProcess | undefined;
let sim: UpstreamSim | undefined;
let device: Device | undefined;
afterEach(async () => {
  await device?.close();
  device = undefined;
  await h?.close();
  h = undefined;
  await service?.stop();
  service = undefined;
  await sim?.close();
  sim = undefined;
});

describe('prompt templates', () => {
  it('renders a template request into exactly the prompt the upstream receives, and counts it by template', async () => {
    h = await startHarness({ CONFIG_FILE: configFile('render', { 'defect-check': DEFECT_CHECK }) });
    const d = await h.device('cam-1');
    await d.publish('high', { id: 't1', template: 'defect-check', vars: { part: 'A7', mm: 0.31, limit: '0.25' } });
    const reply = okOf((await d.reply('t1'))[0]);
    expect(reply.model).toBe('vision-large');
    expect(h.upstream.requests[0]?.body).toEqual({
      model: 'vision-large',
      messages: [
        { role: 'system', content: 'You inspect machined parts. Answer in JSON.' },
        { role: 'user', content: [{ type: 'text', text: 'Part A7: burr height 0.31 mm. Reject over 0.25 mm?' }] },
      ],
      max_tokens: 64,
      temperature: 0,
      response_format: { type: 'json_object' },
    });
    // priority_route: a low request of the same template goes to the model named for low.
    await d.publish('low', { id: 't2', template: 'defect-check', vars: { part: 'B1', mm: 1, limit: 2 } });
    expect(okOf((await d.reply('t2'))[0]).model).toBe('vision-small');
    const usage = await h.bridge.store.operations.usage(Date.now() - 60_000, Date.now());
    expect(usage.byTemplate['defect-check']?.requests).toBe(2);
    expect(await h.bridge.metrics.registry.getSingleMetricAsString('edge_ai_bridge_template_tokens_total')).toContain('template="defect-check",kind="prompt"');
  });

  it('refuses, by name and without calling the upstream: an unknown template, a missing var, an unused var, template with messages', async () => {
    h = await startHarness({ CONFIG_FILE: configFile('refuse', { 'defect-check': DEFECT_CHECK }) });
    const d = await h.device('cam-2');
    const cases: Array<[unknown, string]> = [
      [{ id: 'r1', template: 'x', vars: {} }, 'unknown template "x"'],
      [{ id: 'r2', template: 'defect-check', vars: { part: 'A7', limit: 1 } }, 'missing var "mm"'],
      [{ id: 'r3', template: 'defect-check', vars: { part: 'A7', mm: 1, limit: 1, foo: 'bar' } }, 'unknown var "foo"'],
      [
        { id: 'r4', template: 'defect-check', vars: {}, messages: [{ role: 'user', content: 'hi' }] },
        'give one of messages (chat), input (embeddings) or template, not messages and template',
      ],
      [{ id: 'r5', template: 'defect-check', vars: { part: { nested: true }, mm: 1, limit: 1 } }, 'vars.part: must be a string or a number'],
      [{ id: 'r6', template: 'defect-check', vars: { part: 'A', mm: 1, limit: 1 }, max_tokens: 5 }, 'unknown field "max_tokens"'],
    ];
    for (const [request] of cases) await d.publish('normal', request);
    for (const [request, message] of cases) {
      const id = (request as { id: string }).id;
      expect(errorOf((await d.reply(id))[0])).toMatchObject({ code: 'invalid_request', message });
    }
    expect(h.upstream.requests).toHaveLength(0);
  });

  it('re-reads the templates on SIGHUP; a bad file keeps the ones in use', async () => {
    sim = await startUpstreamSim({ port: 0, latencyMs: 5 });
    const path = configFile('reload', { greet: { messages: [{ role: 'user', content: 'v1 hello {{name}}' }] } });
    service = await startServiceProcess({ UPSTREAM_URL: sim.url, CONFIG_FILE: path });
    device = await connectDevice(`mqtt://127.0.0.1:${service.mqttPort}`, 'hmi-1');
    const ask = async (id: string): Promise<string | null> => {
      await device?.publish('normal', { id, template: 'greet', vars: { name: 'Ada' } });
      return okOf((await device!.reply(id))[0]).content;
    };
    expect(await ask('g1')).toBe('sim answer to: v1 hello Ada');

    writeFileSync(path, JSON.stringify({ templates: { greet: { messages: [{ role: 'user', content: 'v2 good day {{name}}' }] } } }));
    const reloaded = (n: number) => service!.logs.filter((e) => e.msg === 'CONFIG_FILE reloaded: templates, weights and budgets').length >= n;
    service.child.kill('SIGHUP');
    expect(await waitUntil(() => reloaded(1), 5000, 20)).toBe(true);
    expect(await ask('g2')).toBe('sim answer to: v2 good day Ada');

    writeFileSync(path, '{"templates": {"greet": {"messages": []}}}');
    service.child.kill('SIGHUP');
    expect(await waitUntil(() => service!.logs.some((e) => String(e.msg).startsWith('CONFIG_FILE not reloaded')), 5000, 20)).toBe(true);
    expect(await ask('g3')).toBe('sim answer to: v2 good day Ada');
  });

  it('re-reads the budgets on SIGHUP too, and warns that a changed provider setting waits for a restart', async () => {
    sim = await startUpstreamSim({ port: 0, latencyMs: 5 });
    const path = `${dir.path}/budgets.json`;
    const budget = (tokens: number) => ({ limits: [{ name: 'per-device', per: 'device', period: 'day', tokens }] });
    writeFileSync(path, JSON.stringify({ budgets: budget(10) }));
    service = await startServiceProcess({ UPSTREAM_URL: sim.url, CONFIG_FILE: path });
    device = await connectDevice(`mqtt://127.0.0.1:${service.mqttPort}`, 'plc-1');
    const ask = async (id: string): Promise<Reply | undefined> => {
      await device?.publish('normal', { id, messages: [{ role: 'user', content: `count ${id}` }], max_tokens: 16 });
      return (await device!.reply(id))[0];
    };
    expect(errorOf(await ask('b1'))).toMatchObject({ code: 'budget_exceeded' });

    writeFileSync(path, JSON.stringify({ budgets: budget(100_000), embeddingModel: 'embed-v2' }));
    service.child.kill('SIGHUP');
    const logged = (msg: string) => waitUntil(() => service!.logs.some((e) => String(e.msg).startsWith(msg)), 5000, 20);
    expect(await logged('CONFIG_FILE reloaded')).toBe(true);
    expect(await logged('CONFIG_FILE: embeddingModel changed, which a running bridge does not take: restart it to apply them')).toBe(true);
    expect(okOf(await ask('b2')).ok).toBe(true);
    expect(sim.requests).toHaveLength(1);
  });
});
