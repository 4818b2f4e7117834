// The outside contract as code: topics, payload schemas, error codes and the MQTT side.
// Broker, bridge, simulators and tests all import it, so they cannot drift; it imports
// nothing of theirs.
export * from './errors.js';
export * from './mqtt.js';
export * from './payloads.js';
export * from './topics.js';
export * from './request-fast.js';
export * from './scada.js';
