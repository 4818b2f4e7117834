// Reference systems of the benchmark, on the project's own embedded broker with the bridge's
// listener settings:
// - (a) echo: an in-process handler answers every request at once. No queue, no upstream: the
//   physical limit of the MQTT path on this machine (and of the load generator).
// - (h) handler: with UPSTREAM_URL, the handler calls the upstream with undici and publishes its
//   answer. No queue, no limits, no guarantees: what "MQTT in, HTTP out" costs by itself.
import { Pool } from 'undici';
import { startBroker, type Broker } from '../broker/broker.js';
import { loadConfig } from '../bridge/config.js';
import { topics } from '../bridge/contract.js';
import { createLogger } from '../bridge/logger.js';

const config = loadConfig();
const logger = createLogger(config.logLevel);
const upstream = config.upstreamUrl === undefined ? undefined : new URL(config.upstreamUrl);
const pool = upstream && new Pool(upstream.origin, { connections: config.maxConcurrency });
let broker: Broker | undefined;

function reply(deviceId: string, body: object): void {
  void broker!.publish(topics.result(deviceId), Buffer.from(JSON.stringify(body)), { qos: 1, retain: false });
}

async function callUpstream(deviceId: string, request: { id: string; messages: unknown; max_tokens?: number }): Promise<void> {
  try {
    const response = await pool!.request({
      path: `${upstream!.pathname.replace(/\/$/, '')}/chat/completions`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
      body: JSON.stringify({ model: config.upstreamModel, messages: request.messages, max_tokens: request.max_tokens }),
    });
    const answer = (await response.body.json()) as { choices?: Array<{ message?: { content?: string } }> };
    reply(deviceId, { id: request.id, ok: true, content: answer.choices?.[0]?.message?.content ?? '' });
  } catch (err) {
    reply(deviceId, { id: request.id, ok: false, error: { code: 'upstream_error', message: String(err) } });
  }
}

broker = await startBroker(
  config,
  (topic, payload) => {
    // Parsed like intake does, so the echo pays the same JSON cost per request.
    const request = JSON.parse(payload.toString('utf8')) as { id: string; messages: unknown; max_tokens?: number };
    if (pool) void callUpstream(topic.deviceId, request);
    else reply(topic.deviceId, { id: request.id, ok: true });
    return Promise.resolve();
  },
  logger,
);
// The bridge's ready line, whatever LOG_LEVEL, so one launcher starts both.
process.stdout.write(`${JSON.stringify({ msg: 'bridge ready', mqttPort: broker.mqttPort, httpPort: 0 })}\n`);
const stop = (): void =>
  void broker!
    .close()
    .then(() => pool?.close())
    .then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
