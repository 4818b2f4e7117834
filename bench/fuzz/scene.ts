// What the fuzzer runs against: Redis (a private redis-server, or a given one under a unique
// key prefix), the upstream simulator in this process, and the built bridge as a child
// process with small bounds, the innocent device's credentials and two prompt templates.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { hashPassword } from '../../broker/auth.js';
import { deleteDeployment } from '../../bridge/store/redis-keys.js';
import { startServiceProcess, type ServiceProcess } from '../../device-sim/service-process.js';
import { startUpstreamSim, type UpstreamSim } from '../../upstream-sim/sim.js';
import { startPrivateRedis, type PrivateRedis } from '../redis-server.js';
import { startGateway, type Gateway } from './gateway.js';
import { boundedEnv } from './options.js';

export const INNOCENT_ID = 'innocent';
export const INNOCENT_PASSWORD = 'fuzz-innocent';
/** Templates the attackers know of (they also name others). */
export const TEMPLATES = { chat: 'fuzz-check', image: 'fuzz-image' } as const;

export interface Scene {
  readonly service: ServiceProcess;
  readonly upstream: UpstreamSim;
  readonly gateway: Gateway;
  readonly redis: Redis;
  readonly redisUrl: string;
  readonly prefix: string;
  readonly env: Record<string, string>;
  /** The bridge's log lines since the last call, counted and then forgotten (a long run logs a lot). */
  takeLogLines(): number;
  /** Every log line counted so far. */
  logLines(): number;
  /** The bridge's warnings and errors so far: message → times (the first 40 distinct messages). */
  warnings(): Record<string, number>;
  stop(): Promise<void>;
}

function configFile(): unknown {
  return {
    templates: {
      [TEMPLATES.chat]: { messages: [{ role: 'user', content: 'Part {{part}}: burr {{mm}} mm. Reject?' }], max_tokens: 32 },
      [TEMPLATES.image]: { messages: [{ role: 'user', content: 'Any scratch on this part?' }], max_tokens: 32, image_detail: 'low' },
    },
    prices: { 'sim-model': { inputPerMillion: 0.15, outputPerMillion: 0.6 } },
    budgets: { limits: [{ name: 'per-device', per: 'device', period: 'day', tokens: 2_000_000 }] },
  };
}

export async function startScene(redisUrl: string | undefined, ttlS: number, seed: number): Promise<Scene> {
  const closers: Array<() => Promise<void> | void> = [];
  const stop = async (): Promise<void> => {
    for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => undefined);
  };
  try {
    const dir = mkdtempSync(join(tmpdir(), 'eab-fuzz-'));
    closers.push(() => rmSync(dir, { recursive: true, force: true }));
    let url = redisUrl;
    if (url === undefined) {
      const own: PrivateRedis = await startPrivateRedis();
      closers.push(() => own.stop());
      url = own.url;
    }
    const prefix = `fuzz-${seed}-${randomBytes(3).toString('hex')}`;
    const redis = new Redis(url, { maxRetriesPerRequest: 1 });
    closers.push(() => void redis.disconnect());
    closers.push(() => deleteDeployment(redis, prefix).then(() => undefined));
    const upstream = await startUpstreamSim({ port: 0, latencyMs: 50, jitterMs: 20 });
    closers.push(() => upstream.close());
    const gateway = await startGateway(upstream.port);
    closers.push(() => gateway.close());
    const hash = await hashPassword(INNOCENT_PASSWORD);
    writeFileSync(join(dir, 'auth.json'), JSON.stringify({ users: [{ username: INNOCENT_ID, password_hash: hash, role: 'device', device_id: INNOCENT_ID }] }));
    writeFileSync(join(dir, 'config.json'), JSON.stringify(configFile()));
    const env = {
      ...boundedEnv(ttlS),
      REDIS_URL: url,
      REDIS_PREFIX: prefix,
      UPSTREAM_URL: gateway.url,
      UPSTREAM_API_KEYS: 'fuzz-key-a,fuzz-key-b',
      UPSTREAM_MODEL: 'sim-model',
      AUTH_FILE: join(dir, 'auth.json'),
      CONFIG_FILE: join(dir, 'config.json'),
      ALLOW_ANONYMOUS: 'true',
      MAX_PAYLOAD_BYTES: '262144',
    };
    const service = await startServiceProcess(env, { readyTimeoutMs: 30_000 });
    closers.push(() => service.stop('SIGTERM').then(() => undefined));
    // The simulator keeps every request it got; the fuzzer needs none of them.
    const forget = setInterval(() => upstream.reset(), 5000);
    closers.push(() => clearInterval(forget));
    let logLines = 0;
    const warnings = new Map<string, number>();
    const take = (): number => {
      const lines = service.logs.splice(0);
      logLines += lines.length;
      for (const line of lines) {
        const msg = String(line.msg);
        if (Number(line.level) >= 40 && (warnings.has(msg) || warnings.size < 40)) warnings.set(msg, (warnings.get(msg) ?? 0) + 1);
      }
      return lines.length;
    };
    return {
      service,
      upstream,
      gateway,
      redis,
      redisUrl: url,
      prefix,
      env,
      takeLogLines: take,
      logLines: () => (take(), logLines),
      warnings: () => (take(), Object.fromEntries(warnings)),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
