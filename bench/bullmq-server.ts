// Reference system (q) of the benchmark: how such a bridge is commonly built today. The
// project's broker admits each request into a BullMQ queue (priority by class, the PUBACK sent
// once the job is stored, as our bridge does), and a BullMQ worker (concurrency, limiter)
// calls the upstream with undici and publishes the answer. No idempotency, no per-device
// quota, no locks, no cache: fewer guarantees than the bridge, on the same Redis.
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { startBroker, type Broker } from '../broker/broker.js';
import { loadConfig } from '../bridge/config/config.js';
import { topics, type Priority } from '../contract/index.js';
import { createLogger } from '../bridge/logger.js';

const config = loadConfig();
const logger = createLogger(config.logLevel);
if (config.redisUrl === undefined || config.upstreamUrl === undefined) throw new Error('REDIS_URL and UPSTREAM_URL are required');
const upstream = new URL(config.upstreamUrl);
const pool = new Pool(upstream.origin, { connections: config.maxConcurrency });
// BullMQ keys as `{prefix}:…`, so the bench's cleanup of a deployment removes them too.
const prefix = `{${config.redisPrefix}}`;
const QUEUE = 'infer';
/** BullMQ: 1 is the highest priority. */
const PRIORITY: Record<Priority, number> = { critical: 1, high: 2, normal: 3, low: 4 };

interface JobData {
  deviceId: string;
  request: { id: string; messages: unknown; max_tokens?: number };
}

const queueConnection = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const workerConnection = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
const queue = new Queue<JobData>(QUEUE, { connection: queueConnection, prefix });
let broker: Broker | undefined;

function reply(deviceId: string, body: object): Promise<void> {
  return broker!.publish(topics.result(deviceId), Buffer.from(JSON.stringify(body)), { qos: 1, retain: false });
}

const worker = new Worker<JobData>(
  QUEUE,
  async (job) => {
    const { deviceId, request } = job.data;
    const response = await pool.request({
      path: `${upstream.pathname.replace(/\/$/, '')}/chat/completions`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
      body: JSON.stringify({ model: config.upstreamModel, messages: request.messages, max_tokens: request.max_tokens }),
    });
    const answer = (await response.body.json()) as { choices?: Array<{ message?: { content?: string } }> };
    await reply(deviceId, { id: request.id, ok: true, content: answer.choices?.[0]?.message?.content ?? '' });
  },
  {
    connection: workerConnection,
    prefix,
    concurrency: config.maxConcurrency,
    limiter: { max: config.rateLimitRpm, duration: 60_000 },
    removeOnComplete: { count: 0 },
    removeOnFail: { count: 1000 },
  },
);
worker.on('failed', (job) => {
  if (job) void reply(job.data.deviceId, { id: job.data.request.id, ok: false, error: { code: 'upstream_error', message: job.failedReason } });
});

broker = await startBroker(
  config,
  async ({ topic, payload }) => {
    const request = JSON.parse(payload.toString('utf8')) as JobData['request'];
    const priority = topic.kind === 'infer' ? topic.priority : 'normal';
    await queue.add('infer', { deviceId: topic.deviceId, request }, { priority: PRIORITY[priority], removeOnComplete: true });
  },
  logger,
);
process.stdout.write(`${JSON.stringify({ msg: 'bridge ready', mqttPort: broker.mqttPort, httpPort: 0 })}\n`);
const stop = (): void =>
  void broker!
    .close()
    .then(() => worker.close())
    .then(() => queue.close())
    .then(() => pool.close())
    .then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
