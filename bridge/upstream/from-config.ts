// Builds the bridge's ProviderChain from its configuration: the providers, model map,
// routing and breaker settings resolved by config-file.ts (UPSTREAM_*, FALLBACK_*,
// CONFIG_FILE), BREAKER_COOLDOWN_MS, and where breaker state lives (Redis when the bridge
// coordinates through one, so every instance shares each provider's circuit).
import type { Redis } from 'ioredis';
import type { Config } from '../config/config.js';
import type { UpstreamSettings } from '../config/config-file.js';
import type { Logger } from '../logger.js';
import { RedisBreakerStore } from '../store/breaker-state.js';
import { MemoryBreakerStore } from './breaker-memory.js';
import { ProviderChain } from './chain.js';

export function buildProviderChain(
  config: Pick<Config, 'maxAttempts' | 'maxRateLimitedRetries' | 'breakerCooldownMs' | 'redisPrefix'>,
  settings: UpstreamSettings,
  redis: Redis | undefined,
  logger: Logger,
): ProviderChain {
  const store = redis ? new RedisBreakerStore(redis, config.redisPrefix) : new MemoryBreakerStore();
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
      breaker: { ...settings.breaker, cooldownMs: config.breakerCooldownMs, shared: redis !== undefined },
    },
    'upstream providers',
  );
  return chain;
}
