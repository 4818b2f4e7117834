// System (a) of the benchmark: the project's own embedded broker with the same listener settings
// as the bridge, and an in-process handler that answers every request at once. No queue, no
// upstream: the physical limit of the MQTT path on this machine (and of the load generator).
import { startBroker, type Broker } from '../broker/broker.js';
import { loadConfig } from '../bridge/config.js';
import { topics } from '../bridge/contract.js';
import { createLogger } from '../bridge/logger.js';

const config = loadConfig();
const logger = createLogger(config.logLevel);
let broker: Broker | undefined;

broker = await startBroker(
  config,
  (topic, payload) => {
    // Parsed like intake does, so the echo pays the same JSON cost per request.
    const { id } = JSON.parse(payload.toString('utf8')) as { id: string };
    void broker!.publish(topics.result(topic.deviceId), Buffer.from(JSON.stringify({ id, ok: true })), { qos: 1, retain: false });
    return Promise.resolve();
  },
  logger,
);
// The bridge's ready line, whatever LOG_LEVEL, so one launcher starts both.
process.stdout.write(`${JSON.stringify({ msg: 'bridge ready', mqttPort: broker.mqttPort, httpPort: 0 })}\n`);
const stop = (): void => void broker!.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
