// /readyz: ready when not stopping, the store is reachable, a provider is available (its
// circuit admits calls and it has a key not set aside) and the broker connection is up; the
// details say which of these is missing.
import { VERSION } from '../version.js';

/** What /readyz answers: 200 when `ready`, else 503 with the same body. */
export interface Readiness {
  ready: boolean;
  /** Bound ports; MQTT ones only for the listeners of an embedded broker. */
  ports: { http: number; mqtt?: number; mqttTls?: number; mqttWs?: number };
  [detail: string]: unknown;
}

export interface ReadinessSources {
  instanceId: string;
  stopping(): boolean;
  store: { readonly kind: 'memory' | 'redis'; healthy(): boolean };
  /** `keys`: how many the provider has, and how many are set aside (refused); a keyless provider counts as one. */
  providers(): Array<{ name: string; circuit: string; available: boolean; keys: { total: number; revoked: number } }>;
  mqtt: { readonly mode: 'embedded' | 'external'; connected(): boolean; readonly ports: { mqtt?: number; mqttTls?: number; mqttWs?: number } };
}

export type ReadinessState = ReturnType<typeof readiness>;

export function readiness(sources: ReadinessSources, httpPort: number) {
  const { mqtt, store } = sources;
  const stopping = sources.stopping();
  const storeReachable = store.healthy();
  // An open circuit whose cool-down is over counts: otherwise an idle instance that no
  // traffic reaches would never send the probe that closes it. Keys that are only cooling
  // (429) count too: a rate-limited upstream comes back within its Retry-After, and taking
  // every instance out of a load balancer for it would turn a slowdown into an outage.
  const providers = sources.providers().map(({ name, circuit, available, keys }) => {
    const usableKeys = keys.total - keys.revoked;
    return { name, circuit, available: available && usableKeys > 0, usableKeys };
  });
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
