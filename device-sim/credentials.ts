// Each simulated device's broker login: one user name for all, or one per device (its id, or
// a template holding {id}), and the password from --password or a --password-file, so a fleet
// can log in to a broker whose ACL is per device.
import { readFileSync } from 'node:fs';
import { UsageError } from '../contract/index.js';

/** What a --password-file holds: one password for every user, or one per user. */
export interface PasswordFile {
  path: string;
  /** Set when the file is a single password, for every device. */
  all?: string;
  byUser: ReadonlyMap<string, string>;
}

/** What the options say about logins; `username` may hold `{id}`, replaced by each device's id. */
export interface LoginOptions {
  username?: string;
  password?: string;
  passwordFile?: PasswordFile;
}

export interface Login {
  username?: string;
  password?: string;
}

/** The placeholder a --username template holds; --username-from-id is `--username {id}`. */
export const ID_PLACEHOLDER = '{id}';

// mosquitto_passwd writes `user:$7$…` (or `$6$`): a hash is no password a client can send.
const HASH = /^\$[5-7]\$/;

/** The login of device `deviceId`; throws when a password file has no line for its user name. */
export function loginOf(opts: LoginOptions, deviceId: string): Login {
  if (opts.username === undefined) return {};
  const username = opts.username.split(ID_PLACEHOLDER).join(deviceId);
  const file = opts.passwordFile;
  if (file === undefined) return opts.password === undefined ? { username } : { username, password: opts.password };
  const password = file.all ?? file.byUser.get(username);
  if (password === undefined) throw new UsageError(`--password-file ${file.path}: no line for user "${username}" (device ${deviceId})`);
  return { username, password };
}

/** Checks that every device has a login (a password file line for its user name); a message, or null. */
export function checkLogins(opts: LoginOptions, deviceIds: readonly string[]): string | null {
  if (opts.passwordFile === undefined) return null;
  try {
    for (const id of deviceIds) loginOf(opts, id);
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/**
 * Reads a password file: lines `user:password` (split at the first `:`, so a password may hold
 * one), or a single line without `:`, the password of every device. Blank lines and lines
 * starting with `#` are skipped. Throws UsageError naming the file and the line at fault.
 */
export function readPasswordFile(path: string): PasswordFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`--password-file: cannot read "${path}": ${err instanceof Error ? err.message : String(err)}`);
  }
  return parsePasswordFile(path, text);
}

export function parsePasswordFile(path: string, text: string): PasswordFile {
  const fail = (line: number, problem: string): never => {
    throw new UsageError(`--password-file ${path} line ${line}: ${problem}`);
  };
  const entries = text
    .split('\n')
    .map((raw, i) => ({ line: i + 1, text: raw.replace(/\r$/, '') }))
    .filter((e) => e.text.trim() !== '' && !e.text.startsWith('#'));
  if (entries.length === 0) throw new UsageError(`--password-file ${path}: no password in it (lines user:password, or one password for every device)`);
  const first = entries[0]!;
  if (entries.length === 1 && !first.text.includes(':')) return { path, all: first.text, byUser: new Map() };
  const byUser = new Map<string, string>();
  const lineOf = new Map<string, number>();
  for (const { line, text: entry } of entries) {
    const colon = entry.indexOf(':');
    if (colon === -1) fail(line, 'not user:password (a file of one password for every device holds that one line only)');
    const user = entry.slice(0, colon);
    const password = entry.slice(colon + 1);
    if (user === '') fail(line, 'no user name before ":"');
    if (password === '') fail(line, `no password after "${user}:"`);
    if (HASH.test(password)) fail(line, `the password of "${user}" is a hash (as mosquitto_passwd writes): give the plain password`);
    if (byUser.has(user)) fail(line, `user "${user}" again (first on line ${lineOf.get(user)})`);
    byUser.set(user, password);
    lineOf.set(user, line);
  }
  return { path, byUser };
}
