// The store's Lua as one Redis function library (FUNCTION LOAD, FCALL): each lua/<name>.lua is
// the body of one function, and the helpers of lua/includes/ are defined once, when the
// library loads, rather than at every call as a script's would be (most of a small script's
// cost). The library's name carries a hash of its source, so instances of one version share
// it and another version's never clashes; it is loaded on the first call that finds it
// missing (a new Redis, a restart without persistence).
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

const LUA_DIR = new URL('./lua/', import.meta.url);
/** Includes in the order they must be defined (each uses only those before it). */
const INCLUDES = [
  'call',
  'keys',
  'members',
  'fair',
  'window',
  'records',
  'admission',
  'queue',
  'cache',
  'flight',
  'claiming',
  'spend',
  'dead-letters',
  'call-end',
];
const INCLUDE_LINE = /^--- @include "([a-z-]+)"$/gm;

export type LuaArg = string | number;

function read(path: string): string {
  return readFileSync(new URL(path, LUA_DIR), 'utf8');
}

/**
 * One step: its body as STEPS[name] (`many` runs it too), and a function of its own that runs
 * it after setting `rcall` (redis.call cannot be read while a library loads), within one call
 * (includes/call.lua).
 */
function registration(fnName: string, name: string, body: string): string {
  const uses = [...body.matchAll(INCLUDE_LINE)].map((m) => m[1] as string);
  const unknown = uses.filter((include) => !INCLUDES.includes(include));
  if (unknown.length > 0) throw new Error(`unknown Lua include ${unknown.join(', ')} in ${fnName}`);
  const prelude = uses.includes('keys') ? 'useKeys(ARGV)\n' : '';
  const code = body.replace(INCLUDE_LINE, '');
  return (
    `STEPS['${name}'] = function(KEYS, ARGV)\n${prelude}${code}\nend\n` +
    `redis.register_function('${fnName}', function(KEYS, ARGV)\nrcall = redis.call\nstartCall(false)\nlocal result = STEPS['${name}'](KEYS, ARGV)\nendCall()\nreturn result\nend)\n`
  );
}

/**
 * `many`: several steps in one call, each as its own function would run it, in order. ARGV[1]
 * the count, then per step its name, how many keys and how many arguments it takes, then those
 * arguments; KEYS holds every step's keys in order. Each step runs under pcall: a step that
 * fails answers {0, message} and the others still run; one that succeeds answers {1, result}.
 * The steps share one call (includes/call.lua): its clock and counters are read once for all.
 */
const MANY = `
local function slice(list, from, count)
  local out = {}
  for i = 1, count do out[i] = list[from + i] end
  return out
end
local function errorText(err)
  if type(err) == 'table' then err = err.err end
  return tostring(err)
end
redis.register_function('%NAME%', function(KEYS, ARGV)
  rcall = redis.call
  startCall(true)
  local out, k, a = {}, 0, 1
  for i = 1, tonumber(ARGV[1]) do
    local name, nKeys, nArgs = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    a = a + 3
    local keys, args = slice(KEYS, k, nKeys), slice(ARGV, a, nArgs)
    k, a = k + nKeys, a + nArgs
    local step = STEPS[name]
    if not step then
      out[i] = {0, 'unknown step ' .. name}
    else
      local ok, result = pcall(step, keys, args)
      endStep()
      if ok then out[i] = {1, result} else out[i] = {0, errorText(result)} end
    end
  end
  endCall()
  return out
end)
`;

/** One step of a `many` call: which, its keys and its arguments. */
export interface StepCall {
  name: string;
  keys: readonly string[];
  args: readonly LuaArg[];
}

/** A step of a `many` call that failed on its own: the others' results stand. */
export class StepFailed extends Error {
  override readonly name = 'ReplyError';
}

export class LuaLibrary {
  readonly name: string;
  readonly source: string;
  private readonly prefix: string;

  constructor(
    names = readdirSync(LUA_DIR)
      .filter((f) => f.endsWith('.lua'))
      .map((f) => f.slice(0, -4)),
    /** Fair share within a class (lua/includes/fair.lua); off, the queue is first come, first served. */
    fairShare = true,
  ) {
    const helpers = `local FAIR_SHARE = ${fairShare}\n` + INCLUDES.map((name) => read(`includes/${name}.lua`)).join('\n');
    const bodies = names.sort().map((name) => [name, read(`${name}.lua`)] as const);
    const hash = createHash('sha1')
      .update(helpers)
      .update(bodies.map(([n, b]) => `${n}\n${b}`).join('\n'))
      .digest('hex')
      .slice(0, 12);
    this.name = `edge_ai_bridge_${hash}`;
    this.prefix = `eab_${hash}_`;
    const functions = bodies.map(([name, body]) => registration(this.fn(name), name, body)).join('\n');
    const many = MANY.replace('%NAME%', this.fn('many'));
    this.source = `#!lua name=${this.name}\nlocal rcall\nlocal STEPS = {}\n${helpers}\n${functions}\n${many}`;
  }

  async call(redis: Redis, name: string, keys: readonly string[], args: readonly LuaArg[]): Promise<unknown> {
    try {
      return await redis.fcall(this.fn(name), keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('Function not found')) throw err;
      await redis.function('LOAD', 'REPLACE', this.source);
      return redis.fcall(this.fn(name), keys.length, ...keys, ...args);
    }
  }

  /**
   * Several steps in one call (one round trip, one function entry for Redis): each step's
   * result, or a StepFailed for a step that failed alone, in order. The call failing as a
   * whole (Redis out of reach) rejects, as one step's call would.
   */
  async many(redis: Redis, calls: readonly StepCall[]): Promise<unknown[]> {
    const keys: string[] = [];
    const args: LuaArg[] = [calls.length];
    for (const call of calls) {
      keys.push(...call.keys);
      args.push(call.name, call.keys.length, call.args.length, ...call.args);
    }
    const results = (await this.call(redis, 'many', keys, args)) as Array<[number, unknown]>;
    return results.map(([ok, result]) => (ok === 1 ? result : new StepFailed(String(result))));
  }

  private fn(name: string): string {
    return this.prefix + name.replace(/-/g, '_');
  }
}

/** The library every store on Redis calls, and the one of FAIR_SHARE=false. */
export const library = new LuaLibrary();
export const libraryWithoutFairShare = new LuaLibrary(undefined, false);
