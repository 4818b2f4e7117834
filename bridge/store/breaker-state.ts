// Circuit-breaker state in Redis, one hash per provider changed only by lua/breaker.lua, shared
// by every instance. It serves upstream/'s BreakerStore port; the composition root wires it.
import type { Redis } from 'ioredis';
import type { Acquired, BreakerConfig, CircuitState, Recorded } from '../model/circuit.js';
import { library } from './lua-library.js';
import { redisKeys, type RedisKeys } from './redis-keys.js';

const CODE_TO_STATE: Record<string, CircuitState> = { c: 'closed', o: 'open', h: 'half-open' };
const fromCode = (code: string | undefined): CircuitState | undefined => (code ? CODE_TO_STATE[code] : undefined);

/** breaker.lua's answer: state, allowed, probe token, retryAt or openUntil, from state, reason. */
type ScriptReply = [string, number, string, number, string, string];

/** Breakers shared by every instance on one Redis deployment prefix (key `{prefix}:breaker:{provider}`). */
export class RedisBreakerStore {
  readonly shared = true;
  private readonly keys: RedisKeys;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.keys = redisKeys(prefix);
  }

  async acquire(name: string, config: BreakerConfig, now: number): Promise<Acquired> {
    const [state, allowed, token, retryAt, from] = await this.run('acquire', name, config, now, '0', '', 0);
    if (allowed === 1) {
      return { allowed: true, state: fromCode(state) ?? 'closed', probe: token === '' ? undefined : token, from: fromCode(from) };
    }
    return { allowed: false, state: state === 'h' ? 'half-open' : 'open', retryAt };
  }

  async record(name: string, config: BreakerConfig, ok: boolean, probe: string | undefined, now: number, successes = 0): Promise<Recorded> {
    const [state, , , until, from, reason] = await this.run('record', name, config, now, ok ? '1' : '0', probe ?? '', successes);
    return {
      state: fromCode(state) ?? 'closed',
      from: fromCode(from),
      reason: reason === '' ? undefined : reason,
      openUntil: state === 'o' ? until : undefined,
    };
  }

  async release(name: string, config: BreakerConfig, probe: string, now: number): Promise<void> {
    await this.run('release', name, config, now, '0', probe, 0);
  }

  private async run(op: string, name: string, c: BreakerConfig, now: number, ok: string, probe: string, successes: number): Promise<ScriptReply> {
    const raw = (await library.call(
      this.redis,
      'breaker',
      [this.keys.breaker(name)],
      [op, now, c.cooldownMs, c.probeLeaseMs, c.consecutiveFailures, c.errorRate, c.windowMs, c.minCalls, ok, probe, successes],
    )) as unknown[];
    const str = (i: number): string => (raw[i] === undefined || raw[i] === null ? '' : String(raw[i]));
    return [str(0), Number(raw[1] ?? 0), str(2), Number(raw[3] ?? 0), str(4), str(5)];
  }
}
