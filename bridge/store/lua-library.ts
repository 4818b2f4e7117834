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
const INCLUDES = ['keys', 'members', 'fair', 'window', 'records', 'admission', 'queue', 'cache', 'flight', 'claiming', 'spend', 'dead-letters'];
const INCLUDE_LINE = /^--- @include "([a-z-]+)"$/gm;

export type LuaArg = string | number;

function read(path: string): string {
  return readFileSync(new URL(path, LUA_DIR), 'utf8');
}

/** One function: its body, after setting `rcall` (redis.call cannot be read while a library loads) and, if it uses them, the fixed keys. */
function registration(fnName: string, body: string): string {
  const uses = [...body.matchAll(INCLUDE_LINE)].map((m) => m[1] as string);
  const unknown = uses.filter((name) => !INCLUDES.includes(name));
  if (unknown.length > 0) throw new Error(`unknown Lua include ${unknown.join(', ')} in ${fnName}`);
  const prelude = uses.includes('keys') ? 'useKeys(ARGV)\n' : '';
  const code = body.replace(INCLUDE_LINE, '');
  return `redis.register_function('${fnName}', function(KEYS, ARGV)\nrcall = redis.call\n${prelude}${code}\nend)\n`;
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
    const functions = bodies.map(([name, body]) => registration(this.fn(name), body)).join('\n');
    this.source = `#!lua name=${this.name}\nlocal rcall\n${helpers}\n${functions}`;
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

  private fn(name: string): string {
    return this.prefix + name.replace(/-/g, '_');
  }
}

/** The library every store on Redis calls, and the one of FAIR_SHARE=false. */
export const library = new LuaLibrary();
export const libraryWithoutFairShare = new LuaLibrary(undefined, false);
