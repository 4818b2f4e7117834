// /readyz's verdict from its sources: a provider counts only with its circuit admitting calls
// and a key not set aside (cooling keys count).
import { describe, expect, it } from 'vitest';
import { readiness, type ReadinessSources } from '../../bridge/ops/readiness.js';

type ProviderRow = ReturnType<ReadinessSources['providers']>[number];

function sources(providers: ProviderRow[]): ReadinessSources {
  return {
    instanceId: 'i-1',
    stopping: () => false,
    store: { kind: 'memory', healthy: () => true },
    providers: () => providers,
    mqtt: { mode: 'embedded', connected: () => true, ports: { mqtt: 1883 } },
  };
}

const row = (name: string, available: boolean, total: number, revoked: number): ProviderRow => ({
  name,
  circuit: available ? 'closed' : 'open',
  available,
  keys: { total, revoked },
});

describe('readiness', () => {
  it('is ready while some provider admits calls and has a key not set aside', () => {
    expect(readiness(sources([row('primary', true, 2, 1)]), 8080)).toMatchObject({ ready: true, providers: [{ available: true, usableKeys: 1 }] });
    expect(readiness(sources([row('primary', true, 2, 2), row('fallback', true, 1, 0)]), 8080).ready).toBe(true);
  });

  it('is not ready when no provider has a usable key, whatever the circuits say', () => {
    const state = readiness(sources([row('primary', true, 2, 2), row('fallback', false, 1, 0)]), 8080);
    expect(state).toMatchObject({ ready: false, providers: [{ name: 'primary', circuit: 'closed', available: false, usableKeys: 0 }, { available: false }] });
  });
});
