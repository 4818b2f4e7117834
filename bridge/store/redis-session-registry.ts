// SessionRegistry on Redis (keys in redis-keys.ts): a hash of records, one lease key per
// running instance and one claim key per adoption under way, each expiring on Redis' own clock
// (PX), so the instances' clocks never decide who is dead.
import type { Redis } from 'ioredis';
import { library } from './lua-library.js';
import { redisKeys, type RedisKeys } from './redis-keys.js';
import type { AdoptionClaim, Renewal, SessionRecord, SessionRegistry } from './session-registry.js';

type Stored = Omit<SessionRecord, 'instanceId' | 'generation'>;

export class RedisSessionRegistry implements SessionRegistry {
  private readonly keys: RedisKeys;

  constructor(
    /** The store's connection; this class never closes it. */
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = redisKeys(prefix);
  }

  async join({ instanceId, group, clientIds, sessionExpiryS }: Omit<SessionRecord, 'generation'>, ttlMs: number): Promise<number> {
    const stored: Stored = { group, clientIds, sessionExpiryS };
    const keys = [this.keys.sessions, this.keys.alive(instanceId), this.keys.sessionSeq];
    return Number(await library.call(this.redis, 'session-join', keys, [instanceId, JSON.stringify(stored), ttlMs]));
  }

  async renew(instanceId: string, generation: number, ttlMs: number): Promise<Renewal> {
    const keys = [this.keys.sessions, this.keys.alive(instanceId)];
    const held = Number(await library.call(this.redis, 'session-renew', keys, [instanceId, generation, ttlMs]));
    return held === 1 ? 'held' : held === 0 ? 'gone' : 'replaced';
  }

  async leave(instanceId: string, generation?: number): Promise<void> {
    await library.call(this.redis, 'session-leave', [this.keys.sessions, this.keys.alive(instanceId)], [instanceId, generation ?? '']);
  }

  async lapsed(): Promise<SessionRecord[]> {
    const records = Object.entries(await this.redis.hgetall(this.keys.sessions)).flatMap(([id, value]) => parseRecord(id, value));
    if (records.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const r of records) pipeline.exists(this.keys.alive(r.instanceId), this.keys.adoption(r.instanceId));
    const found = (await pipeline.exec()) ?? [];
    return records.filter((_, i) => found[i]?.[0] === null && found[i]?.[1] === 0).sort((a, b) => a.generation - b.generation);
  }

  async claim(record: SessionRecord, adopter: string, ttlMs: number): Promise<AdoptionClaim | undefined> {
    const { instanceId, generation } = record;
    const keys = [this.keys.sessions, this.keys.alive(instanceId), this.keys.adoption(instanceId), this.keys.sessionSeq];
    const token = await library.call(this.redis, 'adopt-claim', keys, [instanceId, generation, adopter, ttlMs]);
    return typeof token === 'string' ? { instanceId, generation, token } : undefined;
  }

  async hold({ instanceId, generation, token }: AdoptionClaim, ttlMs: number): Promise<boolean> {
    const keys = [this.keys.sessions, this.keys.alive(instanceId), this.keys.adoption(instanceId)];
    return (await library.call(this.redis, 'adopt-hold', keys, [instanceId, generation, token, ttlMs])) === 1;
  }

  async release({ instanceId, generation, token }: AdoptionClaim, adopted: boolean): Promise<void> {
    const keys = [this.keys.sessions, this.keys.alive(instanceId), this.keys.adoption(instanceId)];
    await library.call(this.redis, 'adopt-end', keys, [instanceId, generation, token, adopted ? 1 : 0]);
  }
}

/** `{generation}|{JSON}` as a record; nothing for a value this version cannot read. */
function parseRecord(instanceId: string, value: string): SessionRecord[] {
  const bar = value.indexOf('|');
  try {
    const stored = JSON.parse(value.slice(bar + 1)) as Stored;
    if (!Array.isArray(stored.clientIds) || typeof stored.group !== 'string') return [];
    return [{ instanceId, generation: Number(value.slice(0, bar)), ...stored }];
  } catch {
    return [];
  }
}
