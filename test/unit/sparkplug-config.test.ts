// SPARKPLUG_* variables: ids Sparkplug cannot carry are refused at start, and the Edge Node id
// of a fleet sharing Redis is the same on every instance.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../bridge/config/config.js';
import { sparkplugSettings } from '../../bridge/config/sparkplug.js';
import { HostState } from '../../bridge/scada/sparkplug/host-state.js';
import { NodeModel } from '../../bridge/scada/sparkplug/model.js';

const load = (env: Record<string, string>) => loadConfig({ LOG_LEVEL: 'silent', ...env });

describe('Sparkplug settings', () => {
  it('is off without SPARKPLUG_GROUP_ID', () => {
    expect(sparkplugSettings(load({}))).toBeUndefined();
  });

  it.each(['a+b', 'a#', 'line/1', ''.padEnd(65, 'x')])('refuses the id %j with a clear problem', (id) => {
    expect(() => load({ SPARKPLUG_GROUP_ID: id })).toThrow(/SPARKPLUG_GROUP_ID.*none of \+ # \//);
    expect(() => load({ SPARKPLUG_GROUP_ID: 'plant', SPARKPLUG_EDGE_NODE_ID: id })).toThrow(/SPARKPLUG_EDGE_NODE_ID/);
    expect(() => load({ SPARKPLUG_GROUP_ID: 'plant', SPARKPLUG_PRIMARY_HOST_ID: id })).toThrow(/SPARKPLUG_PRIMARY_HOST_ID/);
  });

  it('needs SPARKPLUG_GROUP_ID when another SPARKPLUG_ id is set', () => {
    expect(() => load({ SPARKPLUG_EDGE_NODE_ID: 'n1' })).toThrow(/SPARKPLUG_GROUP_ID: must be set/);
  });

  it('names the node REDIS_PREFIX with Redis (one node per fleet), else INSTANCE_ID, else edge-ai-bridge', () => {
    const fleet = { SPARKPLUG_GROUP_ID: 'plant', REDIS_URL: 'redis://127.0.0.1:6379', REDIS_PREFIX: 'line-4' };
    expect(sparkplugSettings(load({ ...fleet, INSTANCE_ID: 'a' }))?.edgeNodeId).toBe('line-4');
    expect(sparkplugSettings(load({ ...fleet, INSTANCE_ID: 'b' }))?.edgeNodeId).toBe('line-4');
    expect(sparkplugSettings(load({ SPARKPLUG_GROUP_ID: 'plant', INSTANCE_ID: 'solo' }))?.edgeNodeId).toBe('solo');
    expect(sparkplugSettings(load({ SPARKPLUG_GROUP_ID: 'plant' }))?.edgeNodeId).toBe('edge-ai-bridge');
    expect(sparkplugSettings(load({ ...fleet, SPARKPLUG_EDGE_NODE_ID: 'Line 4 AI' }))).toEqual({
      groupId: 'plant',
      edgeNodeId: 'Line 4 AI',
      primaryHostId: undefined,
      deviceIdleMs: 600_000,
    });
  });
});

describe('Sparkplug model', () => {
  const answer = { deviceId: 'd', template: 't', requestId: 'r', quality: 'good' as const, timestamp: 1 };

  it('keeps a declared type: a value of another type (or a non-integer Int64) leaves the metric as it is', () => {
    const model = new NodeModel(() => [{ name: 'n', type: 'integer' }]);
    model.apply({ ...answer, data: { n: 2 } });
    const applied = model.apply({ ...answer, requestId: 'r2', data: { n: 2.5 } });
    expect(applied?.device.metrics.get('AI/t/n')?.value).toBe(2);
    expect(applied?.changed.map((m) => m.name)).toEqual(['AI/t/requestId']);
  });

  it('types the fields of a template it does not know from the values', () => {
    const model = new NodeModel(() => undefined);
    const applied = model.apply({ ...answer, data: { b: true, x: 1, s: 'a' } });
    const types = Object.fromEntries([...(applied?.device.metrics.values() ?? [])].map((m) => [m.name, m.type]));
    expect(types).toMatchObject({ 'AI/t/b': 'Boolean', 'AI/t/x': 'Double', 'AI/t/s': 'String' });
  });
});

describe('primary host STATE', () => {
  it('accepts JSON {online, timestamp} in timestamp order, and nothing else', () => {
    const host = new HostState();
    const state = (online: boolean, timestamp: number): Buffer => Buffer.from(JSON.stringify({ online, timestamp }));
    expect(host.accept(Buffer.from('ONLINE'))).toBeUndefined();
    expect(host.accept(Buffer.from('{"online":"yes","timestamp":1}'))).toBeUndefined();
    expect(host.accept(state(true, 10))).toBe(true);
    expect(host.accept(state(false, 9))).toBeUndefined();
    expect(host.isOnline).toBe(true);
    expect(host.accept(state(false, 10))).toBe(false);
  });
});
