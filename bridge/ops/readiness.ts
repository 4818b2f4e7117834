// /readyz: ready when not stopping, the store is reachable, a provider is available and
// the broker connection is up; the details say which of these is missing.
import type { Readiness } from './admin.js';
import { VERSION } from '../version.js';

export interface ReadinessSources {
  instanceId: string;
  stopping(): boolean;
  store: { readonly kind: 'memory' | 'redis'; healthy(): boolean };
  providers(): Array<{ name: string; circuit: string; available: boolean }>;
  mqtt: { readonly mode: 'embedded' | 'external'; connected(): boolean; readonly ports: { mqtt?: number; mqttTls?: number; mqttWs?: number } };
}

export type ReadinessState = ReturnType<typeof readiness>;

export function readiness(sources: ReadinessSources, httpPort: number) {
  const { mqtt, store } = sources;
  const stopping = sources.stopping();
  const storeReachable = store.healthy();
  const providers = sources.providers().map(({ name, circuit, available }) => ({ name, circuit, available }));
  // An open circuit whose cool-down is over counts: otherwise an idle instance that no
  // traffic reaches would never send the probe that closes it.
  const providerAvailable = providers.some((p) => p.available);
  const brokerConnected = mqtt.connected();
  return {
    ready: !stopping && storeReachable && providerAvailable && brokerConnected,
    listening: !stopping,
    store: store.kind,
    storeReachable,
    broker: mqtt.mode,
    brokerConnected,
    providers,
    ports: { ...mqtt.ports, http: httpPort },
    instance: sources.instanceId,
    version: VERSION,
  } satisfies Readiness;
}
