// Reference systems of the benchmark, on the project's own embedded broker with the bridge's
// listener settings:
// - (a) echo: an in-process handler answers every request at once. No queue, no upstream: the
//   physical limit of the MQTT path on this machine (and of the load generator).
// - (h) handler: with UPSTREAM_URL, the handler calls the upstream with undici and publishes its
//   answer. No queue, no limits, no guarantees: what "MQTT in, HTTP out" costs by itself.
// - (h2) the same with HANDLER_THREAD=1: the upstream calls run in a worker thread (one message
//   there and one back per request), to measure what a second thread buys on this machine.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { startBroker, type Broker } from '../broker/broker.js';
import { loadConfig } from '../bridge/config/config.js';
import { topics } from '../contract/index.js';
import { createLogger } from '../bridge/logger.js';

interface Request {
  id: string;
  messages: unknown;
  max_tokens?: number;
}
/** A request handed to the worker thread, and the reply body it hands back. */
interface ToWorker {
  deviceId: string;
  request: Request;
}
interface FromWorker {
  deviceId: string;
  body: string;
}
interface WorkerSettings {
  upstreamUrl: string;
  model: string;
  connections: number;
}

/** Calls the upstream for one request; `reply` gets the body to publish. */
function upstreamCaller(settings: WorkerSettings): (request: Request, reply: (body: string) => void) => Promise<void> {
  const upstream = new URL(settings.upstreamUrl);
  const pool = new Pool(upstream.origin, { connections: settings.connections });
  const path = `${upstream.pathname.replace(/\/$/, '')}/chat/completions`;
  return async (request, reply) => {
    try {
      const response = await pool.request({
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
        body: JSON.stringify({ model: settings.model, messages: request.messages, max_tokens: request.max_tokens }),
      });
      const answer = (await response.body.json()) as { choices?: Array<{ message?: { content?: string } }> };
      reply(JSON.stringify({ id: request.id, ok: true, content: answer.choices?.[0]?.message?.content ?? '' }));
    } catch (err) {
      reply(JSON.stringify({ id: request.id, ok: false, error: { code: 'upstream_error', message: String(err) } }));
    }
  };
}

if (isMainThread) await main();
else {
  const call = upstreamCaller(workerData as WorkerSettings);
  const port = parentPort!;
  port.on('message', ({ deviceId, request }: ToWorker) => {
    void call(request, (body) => port.postMessage({ deviceId, body } satisfies FromWorker));
  });
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  let broker: Broker | undefined;
  const reply = (deviceId: string, body: string): void =>
    void broker!.publish(topics.result(deviceId), Buffer.from(body), { qos: 1, retain: false });

  const settings: WorkerSettings | undefined =
    config.upstreamUrl === undefined
      ? undefined
      : { upstreamUrl: config.upstreamUrl, model: config.upstreamModel, connections: config.maxConcurrency };
  let handle: (deviceId: string, request: Request) => void;
  let worker: Worker | undefined;
  if (!settings) {
    handle = (deviceId, request) => reply(deviceId, JSON.stringify({ id: request.id, ok: true }));
  } else if (process.env.HANDLER_THREAD === '1') {
    const thread = new Worker(new URL(import.meta.url), { workerData: settings });
    thread.on('message', ({ deviceId, body }: FromWorker) => reply(deviceId, body));
    handle = (deviceId, request) => thread.postMessage({ deviceId, request } satisfies ToWorker);
    worker = thread;
  } else {
    const call = upstreamCaller(settings);
    handle = (deviceId, request) => void call(request, (body) => reply(deviceId, body));
  }

  broker = await startBroker(
    config,
    ({ topic, payload }) => {
      // Parsed like intake does, so the echo pays the same JSON cost per request.
      handle(topic.deviceId, JSON.parse(payload.toString('utf8')) as Request);
      return Promise.resolve();
    },
    logger,
  );
  // The bridge's ready line, whatever LOG_LEVEL, so one launcher starts both.
  process.stdout.write(`${JSON.stringify({ msg: 'bridge ready', mqttPort: broker.mqttPort, httpPort: 0 })}\n`);
  const stop = (): void =>
    void broker!
      .close()
      .then(() => worker?.terminate())
      .then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
