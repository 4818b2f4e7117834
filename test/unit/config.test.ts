import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../bridge/config/config.js';
import { ConfigError } from '../../contract/index.js';

const dir = mkdtempSync(join(tmpdir(), 'config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('loadConfig', () => {
  it('gives the contract defaults for an empty environment', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      mqttHost: '127.0.0.1',
      mqttPort: 1883,
      httpHost: '127.0.0.1',
      httpPort: 9464,
      upstreamModel: 'gpt-4o-mini',
      breakerCooldownMs: 10_000,
      rateLimitRpm: 600,
      rateLimitTpm: undefined,
      deviceRateLimitRpm: 120,
      maxConcurrency: 32,
      priorityOffsetsMs: { critical: 0, high: 2000, normal: 5000, low: 15000 },
      queueMax: 10_000,
      maxAttempts: 3,
      upstreamTimeoutMs: 30_000,
      maxRateLimitedRetries: 10,
      maxPayloadBytes: 262_144,
      idempotencyTtlS: 86_400,
      cacheTtlS: 300,
      shutdownGraceMs: 10_000,
      allowAnonymous: true,
      maxConnections: 50_000,
      connectTimeoutMs: 10_000,
      keepaliveLimitS: 600,
      overloadQueueWaitMs: 0,
      heapGrowingPercent: 50,
      drainTimeoutMs: 2000,
      maxClientBacklogBytes: 4_194_304,
      maxInflightQos2: 100,
      maxSubscriptions: 100,
      overloadDelayMs: 100,
      maxPendingAdmissions: 2000,
      logLevel: 'info',
      upstreamApiKeys: [],
    });
  });

  it('parses lists, maps and treats empty variables as unset', () => {
    const c = loadConfig({
      UPSTREAM_API_KEYS: ' k1, k2 ,,',
      PRIORITY_OFFSETS_MS: 'low=60000, high=1',
      MQTT_PORT: '',
      RATE_LIMIT_TPM: '90000',
    });
    expect(c.upstreamApiKeys).toEqual(['k1', 'k2']);
    expect(c.priorityOffsetsMs).toEqual({ critical: 0, high: 1, normal: 5000, low: 60000 });
    expect(c.mqttPort).toBe(1883);
    expect(c.rateLimitTpm).toBe(90_000);
  });

  it.each([
    ['QUEUE_MAX', '0', /QUEUE_MAX: must be at least 1 \(got "0"\)/],
    ['MAX_PENDING_ADMISSIONS', '0', /MAX_PENDING_ADMISSIONS: must be at least 1 \(got "0"\)/],
    ['OVERLOAD_DELAY_MS', '-5', /OVERLOAD_DELAY_MS: must be at least 0 \(got "-5"\)/],
    ['HEAP_GROWING_PERCENT', '5000', /HEAP_GROWING_PERCENT: must be at most 1000 \(got "5000"\)/],
    ['OVERLOAD_QUEUE_WAIT_MS', '1.5', /OVERLOAD_QUEUE_WAIT_MS: must be an integer \(got "1.5"\)/],
    ['PRIORITY_OFFSETS_MS', 'low=-1', /PRIORITY_OFFSETS_MS: offset for low must be a non-negative integer/],
    ['PRIORITY_OFFSETS_MS', 'urgent=1', /unknown priority "urgent"/],
    ['HTTP_PORT', '70000', /HTTP_PORT: must be a port number/],
    ['REDIS_URL', 'http://x', /REDIS_URL: must be a URL \(redis: or rediss:\)/],
  ])('names %s when it is %s', (variable, value, message) => {
    expect(() => loadConfig({ [variable]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [variable]: value })).toThrow(message);
  });

  it('reads Redis as a URL or as Sentinels, and refuses REDIS_WAIT_REPLICAS without Redis', () => {
    expect(loadConfig({}).redis).toBeUndefined();
    expect(loadConfig({ REDIS_URL: 'redis://h:6379' }).redis).toEqual({ url: 'redis://h:6379', sentinelName: 'mymaster' });
    const c = loadConfig({ REDIS_SENTINELS: 's1:26379, [::1]:26380', REDIS_SENTINEL_NAME: 'plant', REDIS_WAIT_REPLICAS: '1' });
    expect(c.redis).toEqual({
      sentinels: [
        { host: 's1', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      sentinelName: 'plant',
    });
    expect(c.redisWaitReplicas).toBe(1);
    expect(() => loadConfig({ REDIS_SENTINELS: 's1' })).toThrow('REDIS_SENTINELS: "s1" is not host:port');
    expect(() => loadConfig({ REDIS_WAIT_REPLICAS: '1' })).toThrow('REDIS_WAIT_REPLICAS: needs Redis: set REDIS_URL or REDIS_SENTINELS');
  });

  it('reads BROKER_ADOPT_AFTER_MS: 5 s by default, 0 for off, at least 1 s otherwise', () => {
    expect(loadConfig({}).brokerAdoptAfterMs).toBe(5000);
    expect(loadConfig({ BROKER_ADOPT_AFTER_MS: '0' }).brokerAdoptAfterMs).toBe(0);
    expect(() => loadConfig({ BROKER_ADOPT_AFTER_MS: '500' })).toThrow('BROKER_ADOPT_AFTER_MS: must be 0 (off) or at least 1000');
  });

  it('never echoes a secret in the error', () => {
    expect(() => loadConfig({ ADMIN_TOKEN: 'hunter2' })).toThrow(/^ADMIN_TOKEN: must be at least 16 characters$/);
  });

  it('is secure by default: a non-loopback listener needs AUTH_FILE or an explicit ALLOW_ANONYMOUS=true', () => {
    expect(() => loadConfig({ MQTT_HOST: '0.0.0.0' })).toThrow(/AUTH_FILE.*ALLOW_ANONYMOUS=true/);
    expect(loadConfig({ MQTT_HOST: '0.0.0.0', ALLOW_ANONYMOUS: 'true' }).allowAnonymous).toBe(true);
    expect(loadConfig({ MQTT_HOST: '::1' }).allowAnonymous).toBe(true);
  });

  it('reports every bad variable at once, one line each, and skips a rule over a variable already reported', () => {
    let error: unknown;
    try {
      loadConfig({ QUEUE_MAX: '0', HTTP_PORT: 'x', FALLBACK_MODEL: 'm', MQTT_TLS_PORT: '70000', TLS_CERT_FILE: '/nonexistent' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { problems, message } = error as ConfigError;
    expect(problems.map((p) => p.variable)).toEqual(['MQTT_TLS_PORT', 'TLS_CERT_FILE', 'HTTP_PORT', 'QUEUE_MAX', 'FALLBACK_URL']);
    expect(message.split('\n')).toEqual(problems.map((p) => `${p.variable}: ${p.problem}`));
    expect(message).toContain('FALLBACK_URL: must be set when FALLBACK_API_KEYS or FALLBACK_MODEL is');
    expect(message).not.toContain('needs TLS_CERT_FILE');
  });

  it('reads CONFIG_FILE once, into the configuration, and reports each of its problems', () => {
    const good = join(dir, 'good.json');
    writeFileSync(good, JSON.stringify({ embeddingModel: 'e5', routing: { low: { model: 'small' } } }));
    const config = loadConfig({ CONFIG_FILE: good });
    expect(config.file.embeddingModel).toBe('e5');
    expect(config.file.routing.low).toEqual({ model: 'small' });
    expect(Object.isFrozen(config)).toBe(true);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ embeddingModel: '', prices: { m: { inputPerMillion: -1, outputPerMillion: 1 } } }));
    expect(() => loadConfig({ CONFIG_FILE: bad, QUEUE_MAX: '0' })).toThrow(
      new RegExp(`^QUEUE_MAX: .*\nCONFIG_FILE: ${bad}:1:\\d+: prices\\.m\\.inputPerMillion: .*\nCONFIG_FILE: ${bad}:1:\\d+: embeddingModel: `),
    );
    const unknownProvider = join(dir, 'unknown.json');
    writeFileSync(unknownProvider, JSON.stringify({ routing: { low: { provider: 'nope' } } }));
    expect(() => loadConfig({ CONFIG_FILE: unknownProvider })).toThrow(/^CONFIG_FILE: routing\.low\.provider: unknown provider "nope"/);
  });
});
