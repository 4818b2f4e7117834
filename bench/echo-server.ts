// Reference systems of the benchmark, on the project's own embedded broker with the bridge's
// listener settings:
// - (a) echo: an in-process handler answers every request at once. No queue, no upstream: the
//   physical limit of the MQTT path on this machine (and of the load generator).
// - (h) handler: with UPSTREAM_URL, the handler calls the upstream with undici and publishes its
//   answer. No queue, no limits, no guarantees: what "MQTT in, HTTP out" costs by itself.
// - (h2) the same with HANDLER_THREAD=1: the upstream calls run in a worker thread (one message
//   there and one back per request), to measure what a second thread buys on this machine.
// Every answer goes to the device's result topic; an MQTT 5 request's also to its Response
// Topic with its Correlation Data, as the bridge does (bridge/results/results.ts).
// ECHO_CONTRACT_REPLY=1: the echo's answer is a complete ok reply as the contract defines it, so
// device code that validates replies (device-sim's mqtt.js fleet) takes it as one.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { startBroker, type Broker } from '../broker/broker.js';
import { loadConfig } from '../bridge/config/config.js';
import { responseTopicProblem, topics, type RequestProperties } from '../contract/index.js';
import { createLogger } from '../bridge/logger.js';

interface Request {
  id: string;
  messages: unknown;
  max_tokens?: number;
}
/** An MQTT 5 request's Response Topic and Correlation Data (base64): plain data, so it crosses to the worker thread. */
interface Route {
  responseTopic: string;
  correlationData?: string;
}
/** A request handed to the worker thread, and the reply body it hands back. */
interface ToWorker {
  deviceId: string;
  request: Request;
  route?: Route;
}
interface FromWorker {
  deviceId: string;
  body: string;
  route?: Route;
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
  port.on('message', ({ deviceId, request, route }: ToWorker) => {
    void call(request, (body) => port.postMessage({ deviceId, body, ...(route ? { route } : {}) } satisfies FromWorker));
  });
}

/** The echo's answer: `{id, ok}` by default, the shortest a generator reads. */
const echoBody =
  process.env.ECHO_CONTRACT_REPLY === '1'
    ? // Priority normal whatever the request's: the bench that asks for it sends normal only.
      (id: string): string =>
        JSON.stringify({
          id,
          ok: true,
          model: 'echo',
          content: 'ok',
          finish_reason: 'stop',
          cached: false,
          attempts: 1,
          priority: 'normal',
          timing: { queued_ms: 0, upstream_ms: 0, total_ms: 0 },
        })
    : (id: string): string => JSON.stringify({ id, ok: true });

/** A Response Topic the bridge would use (the device's own, no wildcard), else none. */
function routeOf(deviceId: string, { responseTopic, correlationData }: RequestProperties): Route | undefined {
  if (responseTopic === undefined || responseTopicProblem(deviceId, responseTopic) !== null) return undefined;
  return { responseTopic, ...(correlationData ? { correlationData: correlationData.toString('base64') } : {}) };
}

async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  let broker: Broker | undefined;
  const reply = (deviceId: string, body: string, route?: Route): void => {
    const payload = Buffer.from(body);
    void broker!.publish(topics.result(deviceId), payload, { qos: 1, retain: false });
    if (route === undefined) return;
    const correlationData = route.correlationData === undefined ? undefined : Buffer.from(route.correlationData, 'base64');
    void broker!.publish(route.responseTopic, payload, { qos: 1, retain: false, properties: { correlationData } });
  };

  const settings: WorkerSettings | undefined =
    config.upstreamUrl === undefined ? undefined : { upstreamUrl: config.upstreamUrl, model: config.upstreamModel, connections: config.maxConcurrency };
  let handle: (deviceId: string, request: Request, route: Route | undefined) => void;
  let worker: Worker | undefined;
  if (!settings) {
    handle = (deviceId, request, route) => reply(deviceId, echoBody(request.id), route);
  } else if (process.env.HANDLER_THREAD === '1') {
    const thread = new Worker(new URL(import.meta.url), { workerData: settings });
    thread.on('message', ({ deviceId, body, route }: FromWorker) => reply(deviceId, body, route));
    handle = (deviceId, request, route) => thread.postMessage({ deviceId, request, ...(route ? { route } : {}) } satisfies ToWorker);
    worker = thread;
  } else {
    const call = upstreamCaller(settings);
    handle = (deviceId, request, route) => void call(request, (body) => reply(deviceId, body, route));
  }

  broker = await startBroker(
    config,
    ({ topic, payload, properties }) => {
      // Parsed like intake does, so the echo pays the same JSON cost per request.
      handle(topic.deviceId, JSON.parse(payload.toString('utf8')) as Request, routeOf(topic.deviceId, properties));
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
