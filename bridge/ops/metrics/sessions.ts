// The embedded broker's persistent sessions (clean=false): what their offline queues hold and
// drop, and the sessions refused or expired. Read at scrape time; absent with BROKER_URL.
import { Counter, Gauge, type Registry } from 'prom-client';
import { PREFIX, type MetricsSources } from './common.js';

export function registerSessionState(registers: Registry[], sources: MetricsSources): void {
  const stats = (): ReturnType<NonNullable<MetricsSources['sessions']>> => sources.sessions?.();
  new Gauge({
    name: `${PREFIX}offline_messages`,
    help: 'Messages queued for persistent sessions (deployment-wide with Redis: take the max over instances), as last sampled by the session sweeper',
    registers,
    collect() {
      this.reset();
      const s = stats();
      if (s) this.set(s.offlineMessages);
    },
  });
  new Counter({
    name: `${PREFIX}offline_messages_dropped_total`,
    help: 'Messages dropped from offline queues: the oldest over MAX_OFFLINE_MESSAGES (queue_full), or older than OFFLINE_MESSAGE_TTL_S (expired)',
    labelNames: ['reason'] as const,
    registers,
    collect() {
      this.reset();
      const s = stats();
      if (!s) return;
      for (const [reason, count] of Object.entries(s.dropped)) this.inc({ reason }, count);
    },
  });
  new Counter({
    name: `${PREFIX}sessions_refused_total`,
    help: 'Persistent sessions refused at CONNECT: their device already held MAX_SESSIONS_PER_DEVICE',
    registers,
    collect() {
      this.reset();
      this.inc(stats()?.refused ?? 0);
    },
  });
  new Counter({
    name: `${PREFIX}sessions_expired_total`,
    help: 'Persistent sessions ended after MAX_SESSION_EXPIRY_S (or their granted MQTT 5 expiry) without their client',
    registers,
    collect() {
      this.reset();
      this.inc(stats()?.expired ?? 0);
    },
  });
}
