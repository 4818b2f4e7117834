// Persistent sessions in Redis (REDIS_URL): the queues stay aedes-persistence-redis' own and
// are trimmed after each enqueue; the register of sessions is ours, next to its keys:
//   bridge:sessions            zset client id → when its session expires (ms)
//   bridge:device:{deviceId}   set of the device's persistent client ids
// All under the connection's key prefix (`{prefix}:aedes:`), so in the deployment's hash slot.
import { LUA } from './sessions-redis-lua.js';
import { deviceOfClientId, type Dropped, type SessionBackend } from './session-backend.js';

type Command = (...args: Array<string | number>) => Promise<unknown>;

/** The subset of an ioredis 5 connection used here (the persistence's own, with its keyPrefix). */
export interface ScriptedRedis {
  defineCommand(name: string, definition: { numberOfKeys?: number; lua: string }): void;
  zadd(key: string, ...args: Array<string | number>): Promise<unknown>;
  zrem(key: string, member: string): Promise<unknown>;
  srem(key: string, member: string): Promise<unknown>;
}

const SESSIONS = 'bridge:sessions';
const DEVICE = 'bridge:device:';
const CLIENTS = 'clients';
/** Sessions whose queues one run of the `total` script counts. */
const SLICE = 500;
const queueKey = (clientId: string): string => `outgoing:${encodeURIComponent(clientId)}`;

export class RedisSessions implements SessionBackend {
  private readonly commands: Record<keyof typeof LUA, Command>;

  /** `keyPrefix` is the connection's own: the scripts need it for the keys they name. */
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly keyPrefix: string,
  ) {
    const keys: Record<keyof typeof LUA, number | undefined> = { trim: undefined, drop: 1, open: 2, claim: 1, total: 1, adopt: 2 };
    for (const [name, lua] of Object.entries(LUA)) {
      const numberOfKeys = keys[name as keyof typeof LUA];
      redis.defineCommand(`bridgeSessions_${name}`, numberOfKeys === undefined ? { lua } : { numberOfKeys, lua });
    }
    const commandOf = (name: keyof typeof LUA): Command => {
      const command = (redis as unknown as Record<string, Command>)[`bridgeSessions_${name}`] as Command;
      return command.bind(redis);
    };
    this.commands = {
      trim: commandOf('trim'),
      drop: commandOf('drop'),
      open: commandOf('open'),
      claim: commandOf('claim'),
      total: commandOf('total'),
      adopt: commandOf('adopt'),
    };
  }

  async trim(clientIds: readonly string[], max: number): Promise<Dropped> {
    const [queueFull, expired] = (await this.commands.trim(clientIds.length, ...clientIds.map(queueKey), this.keyPrefix, max)) as [number, number];
    return { queue_full: queueFull, expired };
  }

  async drop(clientId: string): Promise<void> {
    await this.commands.drop(queueKey(clientId), this.keyPrefix);
  }

  /** A slice of the sessions per script run: Redis serves other commands in between. */
  async total(): Promise<number> {
    let total = 0;
    for (let first = 0; ; first += SLICE) {
      const [entries, sessions] = (await this.commands.total(SESSIONS, this.keyPrefix, first, first + SLICE - 1)) as [number, number];
      total += entries;
      if (sessions < SLICE) return total;
    }
  }

  async open(clientId: string, max: number, expiresAt: number): Promise<boolean> {
    return (await this.commands.open(DEVICE + deviceOfClientId(clientId), SESSIONS, clientId, max, expiresAt)) === 1;
  }

  async touch(clientIds: readonly string[], expiresAt: number): Promise<void> {
    if (clientIds.length === 0) return;
    await this.redis.zadd(SESSIONS, 'XX', ...clientIds.flatMap((id) => [expiresAt, id]));
  }

  async remove(clientId: string): Promise<void> {
    await Promise.all([this.redis.zrem(SESSIONS, clientId), this.redis.srem(DEVICE + deviceOfClientId(clientId), clientId)]);
  }

  async claimExpired(now: number, limit: number): Promise<string[]> {
    return (await this.commands.claim(SESSIONS, now, limit, this.keyPrefix + DEVICE)) as string[];
  }

  /** Registers the persistent sessions kept from before these bounds, expiring at `expiresAt`. */
  async adopt(expiresAt: number): Promise<number> {
    let adopted = 0;
    let cursor = '0';
    do {
      const [next, count] = (await this.commands.adopt(CLIENTS, SESSIONS, cursor, expiresAt, this.keyPrefix + DEVICE)) as [string, number];
      adopted += count;
      cursor = next;
    } while (cursor !== '0');
    return adopted;
  }
}
