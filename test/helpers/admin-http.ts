// Admin HTTP for tests: requests against a running bridge's HTTP_PORT, a strict parser for the
// Prometheus text format, and a bridge started with BridgeOptions (metrics interval).
import { startBridge, type BridgeOptions, type RunningBridge } from '../../bridge/app.js';
import { loadConfig } from '../../bridge/config/config.js';
import { createLogger } from '../../bridge/logger.js';
import { startUpstreamSim, type UpstreamSim, type UpstreamSimOptions } from '../../upstream-sim/sim.js';
import { connectDevice, type Device } from './harness.js';

export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

export async function http(bridge: RunningBridge, path: string, { method = 'GET', token }: { method?: string; token?: string } = {}): Promise<HttpAnswer> {
  const res = await fetch(`http://127.0.0.1:${bridge.httpPort}${path}`, {
    method,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = `[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"`;
// Special values as Prometheus reads them (Go's ParseFloat: case-insensitive; prom-client writes `Nan`).
const VALUE = '(?:[+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][+-]?\\d+)?|[Nn][Aa][Nn]|[+-]?[Ii][Nn][Ff])';
const SAMPLE_LINE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*,?)?\\})? (${VALUE})(?: -?\\d+)?$`);
const HELP_LINE = new RegExp(`^# HELP ${NAME} .*$`);
const TYPE_LINE = new RegExp(`^# TYPE ${NAME} (?:counter|gauge|histogram|summary|untyped)$`);
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"/g;

/** Parses the Prometheus text exposition format (0.0.4) strictly: any other line throws. */
export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      if (!HELP_LINE.test(line) && !TYPE_LINE.test(line)) throw new Error(`bad comment line: ${line}`);
      continue;
    }
    const m = SAMPLE_LINE.exec(line);
    if (!m) throw new Error(`bad sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? '').matchAll(LABEL_PAIR)) labels[pair[1] as string] = pair[2] as string;
    const raw = m[3] as string;
    const special = raw.toLowerCase();
    const value = special === 'nan' ? NaN : special.endsWith('inf') ? (special.startsWith('-') ? -Infinity : Infinity) : Number(raw);
    samples.push({ name: m[1] as string, labels, value });
  }
  return samples;
}

/** The value of one series (0 when absent: a counter not yet incremented). */
export function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found?.value ?? 0;
}

export async function scrape(bridge: RunningBridge): Promise<Sample[]> {
  const res = await http(bridge, '/metrics');
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return parsePrometheus(res.text);
}

/** A bridge with BridgeOptions (startHarness has no way to pass them). */
export async function startBridgeWith(
  env: Record<string, string>,
  sim: Partial<UpstreamSimOptions>,
  options: BridgeOptions,
): Promise<{ bridge: RunningBridge; upstream: UpstreamSim; device(id: string): Promise<Device>; close(): Promise<void> }> {
  const upstream = await startUpstreamSim({ port: 0, latencyMs: 5, ...sim });
  const config = loadConfig({ MQTT_PORT: '0', HTTP_PORT: '0', LOG_LEVEL: 'silent', ...env });
  const bridge = await startBridge({ ...config, upstreamUrl: upstream.url }, createLogger(config.logLevel), undefined, options);
  const devices: Device[] = [];
  return {
    bridge,
    upstream,
    async device(id) {
      const d = await connectDevice(`mqtt://127.0.0.1:${bridge.mqttPort}`, id);
      devices.push(d);
      return d;
    },
    async close() {
      await Promise.all(devices.map((d) => d.close()));
      await bridge.shutdown();
      await upstream.close();
    },
  };
}
