// The Redis steps of sessions-redis.ts, each atomic, one script each in lua/sessions-<name>.lua
// (helpers in lua/includes/, pulled in by a `--- @include "name"` line). They read and write
// aedes-persistence-redis 11.2.2's own keys (the layout cluster.ts describes): key names built
// inside a script take the connection's key prefix from ARGV, as ioredis prefixes only KEYS.
import { readFileSync } from 'node:fs';

const LUA_DIR = new URL('./lua/', import.meta.url);
const INCLUDE_LINE = /^--- @include "([a-z-]+)"$/gm;

const read = (path: string): string => readFileSync(new URL(path, LUA_DIR), 'utf8');

/** A script with its includes in place. */
function script(name: string): string {
  return read(`sessions-${name}.lua`).replace(INCLUDE_LINE, (_, include: string) => read(`includes/${include}.lua`));
}

export const SCRIPT_NAMES = ['trim', 'drop', 'open', 'claim', 'total', 'adopt'] as const;
export type ScriptName = (typeof SCRIPT_NAMES)[number];

export const LUA: Readonly<Record<ScriptName, string>> = Object.freeze(
  Object.fromEntries(SCRIPT_NAMES.map((name) => [name, script(name)])) as Record<ScriptName, string>,
);
