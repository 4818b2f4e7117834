// Finding: the MQTT WebSocket listener accepted any Origin, so any web page shown by a browser
// on the bridge's host could connect as an anonymous device. A browser Origin is now refused
// at the HTTP upgrade (403, before any MQTT) unless MQTT_WS_ALLOWED_ORIGINS lists it (scheme,
// host and port compared exactly, the host without regard to case); a client that sends no
// Origin (not a browser) is unaffected.
import mqtt from 'mqtt';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allowedOrigins } from '../../../broker/ws-origin.js';
import { ConfigError } from '../../../contract/index.js';
import { ask, startHarness, type Harness } from '../../helpers/harness.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ MQTT_WS_PORT: '0', MQTT_WS_ALLOWED_ORIGINS: 'https://HMI.plant.local:8443, http://localhost:3000' });
});
afterAll(async () => {
  await h?.close();
});

const wsUrl = (): string => `ws://127.0.0.1:${h.bridge.broker!.wsPort as number}/mqtt`;

/** The HTTP status of the upgrade: 101 when the WebSocket opened. */
function upgradeStatus(origin: string | undefined): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl(), ['mqtt'], origin === undefined ? {} : { origin });
    socket.once('open', () => {
      socket.close();
      resolve(101);
    });
    socket.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      socket.terminate();
    });
    socket.once('error', (err) => reject(err));
  });
}

/** An MQTT device over the WebSocket listener, with this Origin (none when undefined), answered ok. */
async function askOver(origin: string | undefined, clientId: string): Promise<unknown> {
  const client = await mqtt.connectAsync(wsUrl(), {
    clientId,
    reconnectPeriod: 0,
    connectTimeout: 5000,
    ...(origin === undefined ? {} : { wsOptions: { origin } }),
  });
  const reply = new Promise<unknown>((resolve) => client.once('message', (_t, payload) => resolve(JSON.parse(payload.toString()))));
  await client.subscribeAsync(`devices/${clientId}/result`, { qos: 1 });
  await client.publishAsync(`devices/${clientId}/infer/normal`, JSON.stringify(ask(`${clientId}-1`)), { qos: 1 });
  const answer = await reply;
  await client.endAsync();
  return answer;
}

describe('isolation: the MQTT WebSocket listener refuses browser Origins that are not listed', () => {
  it('refuses https://evil.example, a listed host on another port and the opaque origin at the upgrade (403), before any MQTT', async () => {
    const before = { connect: h.bridge.broker!.refusals.connect, clients: h.bridge.mqtt.clientCount() };
    for (const origin of ['https://evil.example', 'https://hmi.plant.local', 'http://hmi.plant.local:8443', 'null']) {
      expect(await upgradeStatus(origin), origin).toBe(403);
    }
    // mqtt.js, as a page's script would use it: closed without a CONNACK.
    const evil = mqtt.connect(wsUrl(), { clientId: 'cam-evil', reconnectPeriod: 0, connectTimeout: 5000, wsOptions: { origin: 'https://evil.example' } });
    const outcome = await new Promise<string>((resolve) => {
      evil.once('connect', () => resolve('connected'));
      evil.once('close', () => resolve('closed'));
    });
    evil.end(true);
    expect(outcome).toBe('closed');
    expect(h.bridge.broker!.refusals.connect - before.connect).toBe(5);
    expect(h.bridge.mqtt.clientCount()).toBe(before.clients);
    expect(h.upstream.requests).toEqual([]);
  });

  it('accepts a listed Origin (its host in any case) and a client with no Origin; both are answered ok', async () => {
    expect(await upgradeStatus('https://hmi.PLANT.local:8443')).toBe(101);
    expect(await askOver('https://hmi.plant.local:8443', 'cam-hmi')).toMatchObject({ id: 'cam-hmi-1', ok: true });
    expect(await askOver(undefined, 'cam-plain')).toMatchObject({ id: 'cam-plain-1', ok: true });
  });

  it('stops the start on an entry that is not an origin', () => {
    expect(() => allowedOrigins(['https://hmi.plant.local/path'])).toThrow(ConfigError);
    expect(() => allowedOrigins(['hmi.plant.local'])).toThrow(/MQTT_WS_ALLOWED_ORIGINS/);
    expect([...allowedOrigins(['HTTPS://Hmi.plant.local:443/'])]).toEqual(['https://hmi.plant.local']);
  });
});
