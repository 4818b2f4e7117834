// Builds the bridge's ProviderChain from its configuration: the providers, model map,
// routing and breaker settings resolved by config-file.ts (UPSTREAM_*, FALLBACK_*,
// CONFIG_FILE) and BREAKER_COOLDOWN_MS, on the breaker store the composition root chose.
import type { Config } from '../config/config.js';
import type { UpstreamSettings } from '../config/config-file.js';
import type { Logger } from '../logger.js';
import type { BreakerStore } from './breaker-port.js';
import { ProviderChain } from './chain.js';

export function buildProviderChain(
  config: Pick<Config, 'maxAttempts' | 'maxRateLimitedRetries' | 'breakerCooldownMs'>,
  settings: UpstreamSettings,
  store: BreakerStore,
  logger: Logger,
): ProviderChain {
  const chain = new ProviderChain({
    providers: settings.chain,
    models: settings.models,
    routing: settings.routing,
    breaker: { store, ...settings.breaker, cooldownMs: config.breakerCooldownMs },
    maxAttempts: config.maxAttempts,
    maxRateLimitedRetries: config.maxRateLimitedRetries,
    logger,
  });
  logger.info(
    {
      chain: chain.providerNames,
      routing: settings.routing,
      models: Object.keys(settings.models),
      breaker: { ...settings.breaker, cooldownMs: config.breakerCooldownMs, shared: store.shared },
    },
    'upstream providers',
  );
  return chain;
}
