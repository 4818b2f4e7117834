// The help lists every variable the schema has, with the schema's defaults; typo detection
// names the variable a misspelling resembles and leaves the rest of the environment alone.
import { describe, expect, it } from 'vitest';
import { defaultOf, helpText, infoRequested, wrap } from '../../bridge/ops/cli/help.js';
import { editDistance, findTypos } from '../../bridge/config/typos.js';
import { VARIABLES } from '../../bridge/config/variables.js';

describe('help', () => {
  const text = helpText();
  const listed = text.split('\n').flatMap((line) => /^ {2}([A-Z][A-Z0-9_]+)\b/.exec(line)?.[1] ?? []);

  it('lists every variable of the schema, once, and no other', () => {
    expect(listed.sort()).toEqual([...VARIABLES].sort());
  });

  it('shows the schema defaults and "unset" for variables without one', () => {
    expect(text).toMatch(/^ {2}MQTT_PORT .*\[default: 1883\]$/m);
    expect(defaultOf('PRIORITY_OFFSETS_MS')).toBe('critical=0,high=2000,normal=5000,low=15000');
    expect(defaultOf('UPSTREAM_API_KEYS')).toBe('unset');
    expect(defaultOf('REDIS_URL')).toBe('unset');
    expect(defaultOf('FAIR_SHARE')).toBe('true');
    expect(defaultOf('STREAM_QOS')).toBe('0');
  });

  it('keeps every line within 100 columns', () => {
    for (const line of text.split('\n')) expect(line.length, line).toBeLessThanOrEqual(100);
    expect(wrap('a bb ccc', 2, 8)).toEqual(['  a bb', '  ccc']);
  });

  it('answers --help and --version instead of starting', () => {
    expect(infoRequested(['--help'])).toBe(text);
    expect(infoRequested(['start', '--version'])).toMatch(/^\d+\.\d+\.\d+/);
    expect(infoRequested([])).toBeUndefined();
    expect(infoRequested(['start'])).toBeUndefined();
  });
});

describe('typos', () => {
  it('counts edits, a swap of neighbours as one', () => {
    expect(editDistance('MQTT_PROT', 'MQTT_PORT')).toBe(1);
    expect(editDistance('REDIS_ULR', 'REDIS_URL')).toBe(1);
    expect(editDistance('abc', 'abc')).toBe(0);
    expect(editDistance('kitten', 'sitting')).toBe(3);
  });

  it('names the variable a misspelt one resembles', () => {
    expect(findTypos({ MQTT_PROT: '1', REDIS_ULR: 'x', LOGLEVEL: 'debug', UPSTREAM_MODLE: 'm' })).toEqual([
      { variable: 'MQTT_PROT', resembles: 'MQTT_PORT' },
      { variable: 'REDIS_ULR', resembles: 'REDIS_URL' },
      { variable: 'LOGLEVEL', resembles: 'LOG_LEVEL' },
      { variable: 'UPSTREAM_MODLE', resembles: 'UPSTREAM_MODEL' },
    ]);
  });

  it('never warns for known variables or the rest of the environment', () => {
    const env = {
      MQTT_PORT: '1',
      PATH: '/bin',
      HOME: '/root',
      NODE_OPTIONS: '',
      NODE_ENV: 'production',
      HOSTNAME: 'h',
      LANG: 'C',
      HTTP_PROXY: 'x',
      HTTPS_PROXY: 'x',
      NO_PROXY: 'x',
      REDIS_HOST: 'r',
      REDIS_PORT: '6379',
      TERM: 'xterm',
      USER: 'u',
      PWD: '/',
      npm_config_cache: 'x',
      TZ: 'UTC',
      SHLVL: '1',
      LOGNAME: 'u',
      MAIL: 'x',
      TMPDIR: '/tmp',
    };
    expect(findTypos(env)).toEqual([]);
  });
});
