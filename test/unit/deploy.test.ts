// Deployment files (Dockerfile, docker-compose.yml, deploy/): no Docker engine runs the tests,
// so they are parsed and checked against the code they configure — the bridge's environment
// schema (bridge/config/config.ts), its metric names (bridge/ops/metrics/) and the simulators' options.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig, VARIABLES, type Config } from '../../bridge/config/config.js';
import { parseFleetArgs } from '../../device-sim/fleet.js';
import { checkUpstreamSimOptions } from '../../upstream-sim/sim.js';
import { sourceFolders } from '../helpers/code-shape.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
// `merge`: the compose file shares the bridges' settings through a `<<: *bridge` merge key.
const yaml = (path: string): unknown => parse(read(path), { merge: true });

interface Service {
  build?: unknown;
  image?: string;
  command?: string[];
  environment?: Record<string, string | number | boolean>;
  ports?: string[];
  volumes?: string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string[] };
}
const compose = yaml('docker-compose.yml') as { services: Record<string, Service>; volumes?: Record<string, unknown> };
const services = compose.services;
const BRIDGES = ['bridge-1', 'bridge-2'] as const;
const service = (name: string): Service => {
  const s = services[name];
  if (s === undefined) throw new Error(`docker-compose.yml has no service ${name}`);
  return s;
};

/** The variables the bridge reads. */
function configVariables(): Set<string> {
  return new Set(VARIABLES);
}

/** Metric names bridge/ops/metrics/ register (full names, with the prefix). */
function metricNames(): Set<string> {
  const files = readdirSync(join(ROOT, 'bridge/ops/metrics')).filter((name) => name.endsWith('.ts'));
  expect(files).toContain('bridge-metrics.ts');
  const source = files.map((name) => read(`bridge/ops/metrics/${name}`)).join('\n');
  const prefix = /const PREFIX = '([a-z_]+)';/.exec(source)?.[1];
  expect(prefix).toBe('edge_ai_bridge_');
  return new Set([...source.matchAll(/name: `\$\{PREFIX\}([a-z0-9_]+)`/g)].map((m) => `${prefix}${m[1]}`));
}

/** Maps a container path to the repository file a `./host:container[:ro]` volume mounts there. */
function hostPath(s: Service, containerPath: string): string | undefined {
  for (const volume of s.volumes ?? []) {
    const [host, target] = volume.split(':');
    if (host === undefined || target === undefined || !host.startsWith('./')) continue;
    if (containerPath === target) return join(ROOT, host);
    if (containerPath.startsWith(`${target}/`)) return join(ROOT, host, posix.relative(target, containerPath));
  }
  return undefined;
}

const FILE_VARIABLES = ['CONFIG_FILE', 'AUTH_FILE', 'TLS_CERT_FILE', 'TLS_KEY_FILE', 'TLS_CA_FILE'];

/** A bridge service's environment as loadConfig sees it, file paths mapped to the mounted files. */
function bridgeEnv(name: string): Record<string, string> {
  const s = service(name);
  const env = Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v)]));
  for (const variable of FILE_VARIABLES) {
    const value = env[variable];
    if (value === undefined) continue;
    const host = hostPath(s, value);
    if (host === undefined) throw new Error(`${name}: ${variable}=${value} is not mounted from the repository`);
    env[variable] = host;
  }
  return env;
}

const published = (s: Service): Map<number, number> =>
  new Map(
    (s.ports ?? []).map((p) => {
      const parts = String(p).split(':');
      return [Number(parts.at(-1)), Number(parts.at(-2))] as const;
    }),
  );

const dependsOn = (s: Service): string[] => (Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {}));

describe('docker-compose.yml', () => {
  it('has the services of the demo fleet', () => {
    for (const name of ['redis', 'bridge-1', 'bridge-2', 'upstream-sim', 'device-sim', 'prometheus', 'grafana']) {
      expect(services, name).toHaveProperty([name]);
    }
    for (const [name, s] of Object.entries(services)) {
      for (const dep of dependsOn(s)) expect(services, `${name} depends on ${dep}`).toHaveProperty([dep]);
    }
    for (const [name, s] of Object.entries(services)) {
      for (const v of s.volumes ?? []) {
        const host = v.split(':')[0] as string;
        if (host.startsWith('./')) expect(() => readFileSync(join(ROOT, host)), `${name}: ${host}`).not.toThrow(/ENOENT/);
        else expect(compose.volumes ?? {}, `${name}: named volume ${host}`).toHaveProperty([host]);
      }
    }
  });

  it('runs Redis with AOF and noeviction (the bridge refuses any other eviction policy)', () => {
    const command = (service('redis').command ?? []).join(' ');
    expect(command).toMatch(/--appendonly yes\b/);
    expect(command).toMatch(/--maxmemory-policy noeviction\b/);
    expect(service('redis').image).toMatch(/^redis:7/);
  });

  it('gives each bridge only variables the bridge knows, with values loadConfig accepts', () => {
    const known = configVariables();
    const configs: Config[] = [];
    for (const name of BRIDGES) {
      const env = bridgeEnv(name);
      for (const variable of Object.keys(env)) expect(known, `${name}: ${variable}`).toContain(variable);
      const config = loadConfig(env);
      configs.push(config);
      // Reachable from the other containers, sharing the compose Redis and the upstream simulator.
      expect(config.mqttHost).toBe('0.0.0.0');
      expect(config.httpHost).toBe('0.0.0.0');
      expect(config.redisUrl).toBe('redis://redis:6379');
      expect(new URL(config.upstreamUrl ?? '').hostname).toBe('upstream-sim');
      // The image's HEALTHCHECK polls HTTP_PORT, and the listeners match what is published.
      const ports = published(service(name));
      expect(ports.has(config.mqttPort), `${name} publishes MQTT ${config.mqttPort}`).toBe(true);
      expect(ports.has(config.httpPort), `${name} publishes HTTP ${config.httpPort}`).toBe(true);
      expect(dependsOn(service(name))).toEqual(expect.arrayContaining(['redis', 'upstream-sim']));
      // The mounted CONFIG_FILE is valid and prices the model the bridge asks for (cost panel).
      const file = config.file;
      expect(file.prices).toHaveProperty([config.upstreamModel]);
    }
    // One fleet: same Redis and prefix; distinct published host ports.
    expect(new Set(configs.map((c) => `${c.redisUrl}|${c.redisPrefix}`)).size).toBe(1);
    const hostPorts = BRIDGES.flatMap((name) => [...published(service(name)).values()]);
    expect(new Set(hostPorts).size).toBe(hostPorts.length);
  });

  it('runs the upstream simulator where UPSTREAM_URL points, with valid options', () => {
    const command = service('upstream-sim').command ?? [];
    expect(command.slice(0, 2)).toEqual(['node', 'dist/upstream-sim/cli.js']);
    const flag = (name: string): string | undefined => {
      const i = command.indexOf(`--${name}`);
      return i === -1 ? undefined : command[i + 1];
    };
    const known = ['port', 'latency-ms', 'jitter-ms', 'error-rate', 'rate-limit-rpm', 'hang-rate', 'revoked-keys', 'host'];
    for (const arg of command.slice(2).filter((a) => a.startsWith('--'))) expect(known).toContain(arg.slice(2));
    expect(flag('host')).toBe('0.0.0.0');
    const opts = { port: Number(flag('port')), latencyMs: Number(flag('latency-ms') ?? 0), jitterMs: Number(flag('jitter-ms') ?? 0) };
    expect(checkUpstreamSimOptions(opts)).toBeNull();
    const upstream = new URL(bridgeEnv('bridge-1').UPSTREAM_URL ?? '');
    expect(Number(upstream.port)).toBe(opts.port);
  });

  it('points the device-sim fleet at bridge-1 with options device-sim accepts', () => {
    const command = service('device-sim').command ?? [];
    expect(command.slice(0, 2)).toEqual(['node', 'dist/device-sim/cli.js']);
    const args = parseFleetArgs(command.slice(2));
    const url = new URL(args.url);
    expect(url.hostname).toBe('bridge-1');
    expect(Number(url.port)).toBe(loadConfig(bridgeEnv('bridge-1')).mqttPort);
    expect(command).toContain('--reply-timeout');
    expect(args.devices).toBeGreaterThan(0);
    expect(dependsOn(service('device-sim'))).toContain('bridge-1');
  });

  it('builds the bridges and simulators from this repository, one image', () => {
    for (const name of [...BRIDGES, 'upstream-sim', 'device-sim']) {
      expect(service(name).build, name).toBe('.');
      expect(service(name).image, name).toBe(service('bridge-1').image);
    }
  });
});

describe('deploy/prometheus.yml', () => {
  it('scrapes both bridges on their HTTP port', () => {
    const prom = yaml('deploy/prometheus.yml') as {
      scrape_configs: Array<{ job_name: string; metrics_path?: string; static_configs: Array<{ targets: string[] }> }>;
    };
    const targets = prom.scrape_configs.flatMap((job) => {
      expect(job.metrics_path ?? '/metrics').toBe('/metrics');
      return job.static_configs.flatMap((c) => c.targets);
    });
    expect(targets.sort()).toEqual(BRIDGES.map((name) => `${name}:${loadConfig(bridgeEnv(name)).httpPort}`).sort());
    const mount = (service('prometheus').volumes ?? []).find((v) => v.startsWith('./deploy/prometheus.yml:'));
    expect(mount).toBeDefined();
    expect(service('prometheus').command?.join(' ')).toContain(`--config.file=${mount?.split(':')[1]}`);
  });
});

describe('Grafana provisioning and dashboard', () => {
  const dashboardFile = 'deploy/grafana/dashboards/edge-ai-bridge.json';
  interface Panel {
    type: string;
    title: string;
    datasource?: { uid?: string };
    targets?: Array<{ expr: string }>;
    panels?: Panel[];
  }
  const dashboard = JSON.parse(read(dashboardFile)) as { uid: string; title: string; panels: Panel[] };
  const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');

  it('provisions the Prometheus datasource the panels use and a provider for the dashboard folder', () => {
    const datasources = yaml('deploy/grafana/provisioning/datasources/prometheus.yml') as {
      datasources: Array<{ uid: string; type: string; url: string }>;
    };
    const prometheus = datasources.datasources.find((d) => d.type === 'prometheus');
    expect(prometheus?.url).toBe('http://prometheus:9090');
    for (const p of panels) expect(p.datasource?.uid, p.title).toBe(prometheus?.uid);

    const providers = yaml('deploy/grafana/provisioning/dashboards/edge-ai-bridge.yml') as {
      providers: Array<{ type: string; options: { path: string } }>;
    };
    const grafana = service('grafana');
    const path = providers.providers[0]?.options.path ?? '';
    // The provider's folder is where compose mounts deploy/grafana/dashboards.
    const host = hostPath(grafana, `${path}/edge-ai-bridge.json`);
    expect(host && relative(ROOT, host)).toBe(dashboardFile);
    expect(hostPath(grafana, '/etc/grafana/provisioning/datasources/prometheus.yml')).toBe(
      join(ROOT, 'deploy/grafana/provisioning/datasources/prometheus.yml'),
    );
  });

  it('has the issue’s panels, each querying metrics bridge/ops/metrics/ register', () => {
    const known = metricNames();
    const exprs = panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    expect(exprs.length).toBeGreaterThan(0);
    for (const p of panels) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const { expr } of p.targets ?? []) {
        const used = expr.match(/edge_ai_bridge_[a-z0-9_]+/g) ?? [];
        expect(used.length, `${p.title}: ${expr}`).toBeGreaterThan(0);
        for (const name of used) {
          const base = known.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
          expect(known, `${p.title}: ${name}`).toContain(base);
        }
      }
    }
    const all = exprs.join('\n');
    for (const metric of ['queue_depth', 'queue_wait_seconds_bucket', 'upstream_latency_seconds_bucket', 'requests_total', 'circuit_state', 'cost_usd_total']) {
      expect(all).toContain(`edge_ai_bridge_${metric}`);
    }
    expect(all).toMatch(/histogram_quantile\([^)]*by \(le, priority\)/);
    expect(all).toMatch(/edge_ai_bridge_requests_total\{outcome!~"ok\|cached"\}/);
    expect(all).toMatch(/by \(model\) \([^)]*edge_ai_bridge_cost_usd_total/);
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');
  // Instructions only: continuation lines joined, comments dropped.
  const lines = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  const instruction = (name: string): string[] => lines.filter((l) => l.toUpperCase().startsWith(`${name} `));

  it('builds in one stage and runs in another, as a user that is not root', () => {
    const from = instruction('FROM');
    expect(from).toHaveLength(2);
    for (const f of from) expect(f).toMatch(/^FROM node:20-bookworm-slim\b/);
    const runtimeAt = lines.indexOf(from[1] as string);
    const runtime = lines.slice(runtimeAt);
    expect(runtime.some((l) => /^RUN npm ci\b.*--omit=dev/.test(l) && l.includes('--ignore-scripts'))).toBe(true);
    expect(runtime.some((l) => /^COPY --from=\S+ \/app\/dist \.\/dist$/.test(l))).toBe(true);
    const user = runtime
      .filter((l) => l.startsWith('USER '))
      .at(-1)
      ?.slice(5)
      .trim();
    expect(user).toBeDefined();
    expect(['root', '0', '0:0']).not.toContain(user);
    expect(lines.slice(0, runtimeAt).some((l) => l === 'RUN npm run build')).toBe(true);
  });

  it('compiles and copies into the build stage every folder that holds sources', () => {
    const folders = sourceFolders(ROOT);
    expect(folders).toEqual(expect.arrayContaining(['bridge', 'contract']));
    const { include } = JSON.parse(read('tsconfig.build.json')) as { include: string[] };
    expect([...include].sort()).toEqual(folders);
    const buildStage = lines.slice(0, lines.indexOf(instruction('FROM')[1] as string));
    const copied = buildStage
      .filter((l) => l.toUpperCase().startsWith('COPY '))
      .flatMap((l) => l.split(/\s+/).slice(1, -1))
      .map((src) => src.replace(/^\.\//, ''));
    for (const folder of folders) expect(copied, folder).toContain(folder);
  });

  it('checks /healthz, exposes the MQTT and HTTP ports and starts the bridge', () => {
    const healthcheck = instruction('HEALTHCHECK');
    expect(healthcheck).toHaveLength(1);
    expect(healthcheck[0]).toContain('/healthz');
    expect(instruction('EXPOSE')[0]?.split(/\s+/).slice(1).sort()).toEqual(['1883', '9464']);
    expect(instruction('CMD').at(-1)).toBe('CMD ["node", "dist/bridge/main.js"]');
    // The paths the build copies in must not be excluded from the build context.
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    for (const copy of instruction('COPY').filter((l) => !l.includes('--from='))) {
      for (const src of copy.split(/\s+/).slice(1, -1)) expect(ignored, copy).not.toContain(src.replace(/^\.\//, ''));
    }
  });
});
