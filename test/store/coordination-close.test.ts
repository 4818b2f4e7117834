// The Redis coordination's opening pushes one closer per part it opened: a stop closes them
// last opened first, and an opening that fails half-way closes what it had opened, leaving no
// connection behind.
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../bridge/config/config.js';
import { openCoordination } from '../../bridge/coordination.js';
import { createLogger } from '../../bridge/logger.js';
import { logSink } from '../helpers/log-sink.js';
import { deletePrefix, REDIS_URL, uniquePrefix } from '../helpers/redis.js';

const admin = new Redis(REDIS_URL, { lazyConnect: true });
afterAll(() => admin.quit());

/** Connections to Redis named after this deployment prefix, as CLIENT LIST shows them. */
async function connectionsOf(prefix: string): Promise<string[]> {
  const list = (await admin.client('LIST')) as string;
  return [...list.matchAll(/name=(\S+)/g)].map((m) => m[1] as string).filter((name) => name.includes(prefix));
}

const configWith = (prefix: string, env: Record<string, string> = {}) =>
  loadConfig({ REDIS_URL, REDIS_PREFIX: prefix, MQTT_PORT: '0', HTTP_PORT: '0', LOG_LEVEL: 'silent', ...env });

describe('the Redis coordination closes what it opened', () => {
  it('closes the parts last opened first, and leaves no connection of its own open', async () => {
    const prefix = uniquePrefix('closeorder');
    const { stream, lines } = logSink();
    // With the plant's broker: no cluster plugins, which the embedded broker would open and close itself.
    const coordination = await openCoordination(
      configWith(prefix, { REDIS_WAIT_REPLICAS: '1', BROKER_URL: 'mqtt://127.0.0.1:1' }),
      createLogger('debug', stream),
    );
    expect((await connectionsOf(prefix)).sort()).toEqual(
      [`edge-ai-bridge:${prefix}`, `edge-ai-bridge:${prefix}:admissions`, `edge-ai-bridge:${prefix}:presence`].sort(),
    );
    await coordination.close();
    const closing = lines()
      .filter((l) => l.msg === 'closing')
      .map((l) => l.part);
    expect(closing).toEqual(['outage', 'scada', 'presence', `edge-ai-bridge:${prefix}:admissions`, 'redis health', `edge-ai-bridge:${prefix}`]);
    await expect.poll(() => connectionsOf(prefix)).toEqual([]);
    await deletePrefix(admin, prefix);
  });

  it('closes what it had opened when a later step fails', async () => {
    const prefix = uniquePrefix('closefail');
    // A user that may not subscribe: the presence's subscription fails after the store's
    // connection, its health check and the admissions' connection are open.
    const user = `${prefix}-user`;
    await admin.acl('SETUSER', user, 'on', '>secret', '~*', 'resetchannels', '+@all');
    try {
      const { stream, lines } = logSink();
      const url = `redis://${user}:secret@127.0.0.1:${new URL(REDIS_URL).port || 6379}`;
      const opening = openCoordination(configWith(prefix, { REDIS_URL: url, REDIS_WAIT_REPLICAS: '1' }), createLogger('debug', stream));
      await expect(opening).rejects.toThrow(/REDIS_URL.*cannot subscribe/);
      expect(
        lines()
          .filter((l) => l.msg === 'closing')
          .map((l) => l.part),
      ).toEqual([`edge-ai-bridge:${prefix}:admissions`, 'redis health', `edge-ai-bridge:${prefix}`]);
      await expect.poll(() => connectionsOf(prefix)).toEqual([]);
    } finally {
      await admin.acl('DELUSER', user);
      await deletePrefix(admin, prefix);
    }
  });
});
