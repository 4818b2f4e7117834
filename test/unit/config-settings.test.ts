// CONFIG_FILE in YAML or JSON, its `settings` under the environment, and what `edge-ai-bridge
// config` shows of them: read as an operator writes the file, errors as the operator sees them.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfigFile } from '../../bridge/config/config-file.js';
import { loadConfig, readConfiguration } from '../../bridge/config/config.js';
import { rereadConfigFile } from '../../bridge/config/reload.js';
import { SECRET_VARIABLES, VARIABLES } from '../../bridge/config/variables.js';
import { configReport, configText } from '../../bridge/ops/cli/config.js';
import { ConfigError } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { logSink } from '../helpers/log-sink.js';

const dir = mkdtempSync(join(tmpdir(), 'config-settings-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
function file(name: string, text: string): string {
  const path = join(dir, `${n++}-${name}`);
  writeFileSync(path, text);
  return path;
}

/** The problems loadConfig stops the start with, one line each. */
function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message.split('\n');
    throw err;
  }
  return [];
}

const YAML = `# the plant's bridge
settings:
  MQTT_PORT: 1884          # a number
  UPSTREAM_MODEL: small
  FAIR_SHARE: false        # a boolean
  ADMIN_TOKEN: "0123456789abcdef-secret"
  REDIS_URL: redis://:hunter2@redis.plant:6379
templates:
  defect-check:
    messages:
      - { role: user, content: "Part {{part}}?" }
budgets:
  limits:
    - { name: fleet-day, per: fleet, period: day, tokens: 1000 }
`;

describe('CONFIG_FILE in YAML', () => {
  it('reads settings and sections, comments allowed, with numbers and booleans as values', () => {
    const config = loadConfig({ CONFIG_FILE: file('plant.yaml', YAML) });
    expect(config).toMatchObject({
      mqttPort: 1884,
      upstreamModel: 'small',
      fairShare: false,
      adminToken: '0123456789abcdef-secret',
      redisUrl: 'redis://:hunter2@redis.plant:6379',
    });
    expect(Object.keys(config.file.templates)).toEqual(['defect-check']);
    expect(config.file.budgets.limits.map((l) => l.name)).toEqual(['fleet-day']);
  });

  it('reads the same file written as JSON the same way', () => {
    const json = {
      settings: { MQTT_PORT: 1884, UPSTREAM_MODEL: 'small', FAIR_SHARE: false },
      templates: { t: { messages: [{ role: 'user', content: 'x' }] } },
    };
    const fromJson = loadConfig({ CONFIG_FILE: file('plant.json', JSON.stringify(json, null, 2)) });
    const fromYaml = loadConfig({
      CONFIG_FILE: file(
        'plant.yml',
        'settings: { MQTT_PORT: 1884, UPSTREAM_MODEL: small, FAIR_SHARE: false }\ntemplates:\n  t:\n    messages: [{ role: user, content: x }]\n',
      ),
    });
    expect(fromJson.file).toEqual(fromYaml.file);
    expect([fromJson.mqttPort, fromJson.fairShare]).toEqual([1884, false]);
  });

  it('names the line and column of a YAML syntax error', () => {
    const path = file('broken.yaml', 'settings:\n  MQTT_PORT: 1884\n  LOG_LEVEL: [debug\ntemplates: {}\n');
    const [line, ...rest] = problemsOf({ CONFIG_FILE: path });
    expect(rest).toEqual([]);
    expect(line).toMatch(new RegExp(`^CONFIG_FILE: ${path}:\\d+:\\d+: not valid YAML: `));
    expect(line).not.toContain(`${path}:1:`);
  });

  it('names the line and column of a JSON syntax error', () => {
    const path = file('broken.json', '{\n  "settings": { "MQTT_PORT": 1884, }\n}\n');
    expect(problemsOf({ CONFIG_FILE: path })).toEqual([`CONFIG_FILE: ${path}:2:36: not valid JSON: Expected double-quoted property name`]);
  });

  it('names the line, column and path of a bad value in a section', () => {
    const path = file('bad-budget.yaml', 'budgets:\n  limits:\n    - name: fleet\n      per: fleet\n      period: week\n      tokens: 10\n');
    expect(problemsOf({ CONFIG_FILE: path })).toEqual([expect.stringMatching(new RegExp(`^CONFIG_FILE: ${path}:5:15: budgets\\.limits\\.0\\.period: `))]);
  });

  it('points an unknown key at the key itself', () => {
    const path = file('unknown-key.yaml', 'prices: {}\n\nchian: [primary]\n');
    expect(problemsOf({ CONFIG_FILE: path })).toEqual([`CONFIG_FILE: ${path}:3:1: (top level): Unrecognized key: "chian"`]);
  });

  it('reads a file of comments only as an empty configuration', () => {
    expect(loadConfig({ CONFIG_FILE: file('empty.yaml', '# nothing yet\n') }).file.templates).toEqual({});
  });
});

describe('CONFIG_FILE settings', () => {
  it('an unknown name is refused, naming the closest variable, even beside a bad value', () => {
    const path = file('typo.yaml', 'settings:\n  MQTT_PROT: 1884\n  redis_url: redis://r:6379\n  LOG_LEVEL: [debug]\n');
    expect(problemsOf({ CONFIG_FILE: path })).toEqual([
      `CONFIG_FILE: ${path}:2:3: settings.MQTT_PROT: not a variable the bridge reads: did you mean MQTT_PORT?`,
      `CONFIG_FILE: ${path}:3:3: settings.redis_url: not a variable the bridge reads: did you mean REDIS_URL?`,
      `CONFIG_FILE: ${path}:4:14: settings.LOG_LEVEL: must be a string, a number or true/false`,
    ]);
  });

  it('CONFIG_FILE and INSTANCE_ID come only from the environment', () => {
    const path = file('env-only.yaml', 'settings:\n  CONFIG_FILE: other.yaml\n  INSTANCE_ID: bridge-a\n');
    expect(problemsOf({ CONFIG_FILE: path })).toEqual([
      `CONFIG_FILE: ${path}:2:3: settings.CONFIG_FILE: CONFIG_FILE can only be set in the environment`,
      `CONFIG_FILE: ${path}:3:3: settings.INSTANCE_ID: INSTANCE_ID can only be set in the environment`,
    ]);
  });

  it('a bad value is named by its variable and its place in the file', () => {
    const path = file('bad-value.yaml', 'settings:\n  QUEUE_MAX: 0\n  MQTT_HOST: 0.0.0.0\n');
    expect(problemsOf({ CONFIG_FILE: path })).toEqual([
      `QUEUE_MAX: must be at least 1 (got "0") (CONFIG_FILE ${path}:2:14)`,
      `MQTT_HOST: 0.0.0.0 is not a loopback address: set AUTH_FILE, or ALLOW_ANONYMOUS=true to accept anonymous devices from the network (CONFIG_FILE ${path}:3:14)`,
    ]);
    // The environment's own value fixes it.
    expect(problemsOf({ CONFIG_FILE: path, QUEUE_MAX: '5', ALLOW_ANONYMOUS: 'true' })).toEqual([]);
  });

  it('the environment overrides the file, an empty variable does not, a name without a value is unset', () => {
    const path = file('override.yaml', 'settings:\n  MQTT_PORT: 1884\n  HTTP_PORT: 9000\n  RATE_LIMIT_RPM: 60\n  REDIS_URL:\n');
    const { config, sources } = readConfiguration({ CONFIG_FILE: path, MQTT_PORT: '1999', HTTP_PORT: ' ' });
    expect(config).toMatchObject({ mqttPort: 1999, httpPort: 9000, rateLimitRpm: 60, queueMax: 10_000, redis: undefined });
    expect(sources).toMatchObject({
      MQTT_PORT: 'environment',
      HTTP_PORT: 'file',
      RATE_LIMIT_RPM: 'file',
      QUEUE_MAX: 'default',
      REDIS_URL: 'default',
      CONFIG_FILE: 'environment',
    });
  });

  it('a SIGHUP logs changed settings as needing a restart, by name and never by value', () => {
    const path = file('reload.yaml', 'settings:\n  MQTT_PORT: 1884\n  ADMIN_TOKEN: first-token-0123456789\n');
    const started = parseConfigFile(path).file;
    if (!started) throw new Error('the file should parse');
    writeFileSync(path, 'settings:\n  MQTT_PORT: 1884\n  ADMIN_TOKEN: second-token-0123456789\n  LOG_LEVEL: debug\n');
    const sink = logSink();
    expect(rereadConfigFile(path, started, createLogger('info', sink.stream))).toBeDefined();
    const warning = sink.lines().find((e) => e.level === 40);
    expect(warning).toMatchObject({ parts: ['settings'], settings: ['ADMIN_TOKEN', 'LOG_LEVEL'] });
    expect(warning?.msg).toBe('CONFIG_FILE: settings (ADMIN_TOKEN, LOG_LEVEL) changed, which a running bridge does not take: restart it to apply them');
    expect(sink.text()).not.toContain('second-token');
  });
});

describe('edge-ai-bridge config', () => {
  it('shows each value with its source, the environment over the file, secrets redacted', () => {
    const path = file('report.yaml', YAML);
    const { report } = configReport({ CONFIG_FILE: path, MQTT_PORT: '1999', UPSTREAM_API_KEYS: 'sk-live-1,sk-live-2' });
    if (!report) throw new Error('the configuration should be good');
    const entry = (variable: string) => report.variables.find((e) => e.variable === variable);
    expect(entry('MQTT_PORT')).toEqual({ variable: 'MQTT_PORT', value: '1999', source: 'environment', overridesFile: true });
    expect(entry('UPSTREAM_MODEL')).toEqual({ variable: 'UPSTREAM_MODEL', value: 'small', source: 'file', at: `${path}:4:19` });
    expect(entry('QUEUE_MAX')).toEqual({ variable: 'QUEUE_MAX', value: '10000', source: 'default' });
    expect(entry('ADMIN_TOKEN')).toMatchObject({ value: '<redacted>', source: 'file' });
    expect(entry('UPSTREAM_API_KEYS')).toMatchObject({ value: '<redacted>', source: 'environment' });
    expect(entry('REDIS_URL')).toMatchObject({ value: 'redis://:<redacted>@redis.plant:6379', source: 'file' });
    expect(report.variables.map((e) => e.variable)).toEqual(VARIABLES);
    expect(report.configFile).toEqual({ path, format: 'yaml', counts: { templates: 1, weights: 0, budgets: 1, providers: 0, settings: 5 } });
    const text = configText(report) + JSON.stringify(report);
    for (const secret of ['0123456789abcdef-secret', 'sk-live', 'hunter2']) expect(text).not.toContain(secret);
    expect(text).toMatch(/^MQTT_PORT +1999 +environment \(over the file's\)$/m);
  });

  it('redacts keys written into the file for a provider', () => {
    const path = file('keys.yaml', 'providers:\n  - { name: local, url: "http://u:pw-in-url@127.0.0.1:8000/v1", apiKeys: [sk-in-file] }\n');
    const { report } = configReport({ CONFIG_FILE: path });
    expect(report?.file.providers[0]).toMatchObject({ url: 'http://u:<redacted>@127.0.0.1:8000/v1', apiKeys: ['<redacted>'] });
    const text = configText(report as NonNullable<typeof report>) + JSON.stringify(report);
    for (const secret of ['sk-in-file', 'pw-in-url']) expect(text).not.toContain(secret);
  });

  it('treats every variable named like a secret as one (a new secret variable must join the list)', () => {
    const secretLike = VARIABLES.filter((v) => /_TOKEN$|_KEYS?$|PASSWORD/.test(v) && !v.endsWith('_FILE'));
    expect([...SECRET_VARIABLES].sort()).toEqual(secretLike.sort());
  });
});
