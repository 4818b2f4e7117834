// Loads one Lua script from lua/, inlining `--- @include "name"` lines from lua/includes/,
// and runs it by SHA (EVALSHA), loading it on the first NOSCRIPT (BullMQ's pattern).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

const LUA_DIR = new URL('./lua/', import.meta.url);
const INCLUDE = /^--- @include "([a-z-]+)"$/gm;

function readLua(name: string): string {
  return readFileSync(new URL(`${name}.lua`, LUA_DIR), 'utf8').replace(INCLUDE, (_line, include: string) =>
    readFileSync(new URL(`includes/${include}.lua`, LUA_DIR), 'utf8'),
  );
}

export type LuaArg = string | number;

export class LuaScript {
  readonly source: string;
  readonly sha: string;

  constructor(readonly name: string) {
    this.source = readLua(name);
    this.sha = createHash('sha1').update(this.source).digest('hex');
  }

  async run(redis: Redis, keys: readonly string[], args: readonly LuaArg[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      // EVAL caches the script, so the next call finds it by SHA again.
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}
