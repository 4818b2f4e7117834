// Who a connecting client is: anonymous devices named by their client id, users of
// AUTH_FILE (scrypt password hashes, a role each) and mTLS certificates (CN = device id).
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError, DEVICE_ID_PATTERN, deviceIdOfClientId } from '../contract/index.js';
import type { Identity, Role } from './acl.js';

/** An anonymous client is a device whose id is its client id up to the first `.`. */
export function authenticateAnonymous(clientId: string): Identity | null {
  const deviceId = deviceIdOfClientId(clientId);
  return deviceId === null ? null : { role: 'device', deviceId };
}

/** A device's client id is its device id, or its device id followed by `.` and anything. */
export function clientIdBelongsTo(clientId: string, deviceId: string): boolean {
  return clientId === deviceId || clientId.startsWith(`${deviceId}.`);
}

// ---------------------------------------------------------------------------------------
// Password hashes: `scrypt$N$r$p$saltB64$hashB64`, self-describing so parameters can grow.

const SCRYPT = { N: 16384, r: 8, p: 1, saltBytes: 16, keyBytes: 32 } as const;
/** Bounds on parameters read from a file: a hostile hash must not make a login cost gigabytes. */
const MAX_N = 1 << 20;
const MAX_RP = 16;

interface ParsedHash {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  hash: Buffer;
}

const B64 = /^[A-Za-z0-9+/]+={0,2}$/;

export function parseHash(text: string): ParsedHash | null {
  const parts = text.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [, n, r, p, salt, hash] = parts as [string, string, string, string, string, string];
  const N = Number(n);
  const R = Number(r);
  const P = Number(p);
  const isPow2 = Number.isInteger(N) && N > 1 && N <= MAX_N && (N & (N - 1)) === 0;
  const inRange = (v: number): boolean => Number.isInteger(v) && v >= 1 && v <= MAX_RP;
  if (!isPow2 || !inRange(R) || !inRange(P) || !B64.test(salt) || !B64.test(hash)) return null;
  const saltBuf = Buffer.from(salt, 'base64');
  const hashBuf = Buffer.from(hash, 'base64');
  if (saltBuf.length < 8 || hashBuf.length < 16 || hashBuf.length > 128) return null;
  return { N, r: R, p: P, salt: saltBuf, hash: hashBuf };
}

function derive(password: Buffer | string, salt: Buffer, keyLen: number, N: number, r: number, p: number): Promise<Buffer> {
  const options: ScryptOptions = { N, r, p, maxmem: 256 * N * r + 1024 * 1024 };
  return new Promise((resolve, reject) => scrypt(password, salt, keyLen, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export async function hashPassword(password: string | Buffer): Promise<string> {
  const { N, r, p } = SCRYPT;
  const salt = randomBytes(SCRYPT.saltBytes);
  const key = await derive(password, salt, SCRYPT.keyBytes, N, r, p);
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Constant-time comparison of a password against a stored hash (already validated). */
export async function verifyPassword(password: Buffer | string, stored: string): Promise<boolean> {
  const parsed = parseHash(stored);
  if (!parsed) return false;
  const key = await derive(password, parsed.salt, parsed.hash.length, parsed.N, parsed.r, parsed.p);
  return timingSafeEqual(key, parsed.hash);
}

// ---------------------------------------------------------------------------------------
// AUTH_FILE

const UserSchema = z
  .object({
    username: z.string().min(1, 'username must not be empty'),
    password_hash: z.string().refine((h) => parseHash(h) !== null, 'password_hash must be "scrypt$N$r$p$salt$hash" (see `edge-ai-bridge hash-password`)'),
    role: z.enum(['device', 'observer', 'operator']),
    device_id: z.string().regex(DEVICE_ID_PATTERN, 'device_id must be 1-64 characters of A-Za-z0-9_-').optional(),
  })
  .strict()
  .refine((u) => u.role !== 'device' || u.device_id !== undefined, 'a user with role "device" needs a device_id');

const AuthFileSchema = z
  .object({ users: z.array(UserSchema) })
  .strict()
  .superRefine((file, ctx) => {
    const seen = new Set<string>();
    for (const [i, user] of file.users.entries()) {
      if (seen.has(user.username)) ctx.addIssue({ code: 'custom', path: ['users', i, 'username'], message: `duplicate username "${user.username}"` });
      seen.add(user.username);
    }
  });

export interface User {
  username: string;
  passwordHash: string;
  role: Role;
  deviceId: string | undefined;
}

/** Reads and validates AUTH_FILE; any problem is a ConfigError naming AUTH_FILE. */
export function loadAuthFile(path: string): Map<string, User> {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError('AUTH_FILE', `${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = AuthFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : '';
    throw new ConfigError('AUTH_FILE', `${path}${where}: ${issue?.message ?? 'invalid'}`);
  }
  const users = new Map<string, User>();
  for (const u of parsed.data.users) {
    users.set(u.username, { username: u.username, passwordHash: u.password_hash, role: u.role, deviceId: u.device_id });
  }
  return users;
}

// ---------------------------------------------------------------------------------------
// Throttle of failed logins per client address.

export interface ThrottleOptions {
  /** Failures within `windowMs` from one address before attempts are slowed down. */
  threshold: number;
  windowMs: number;
  /** Delay after the first failure over the threshold; doubles with each further one. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_THROTTLE: ThrottleOptions = { threshold: 5, windowMs: 60_000, baseDelayMs: 1000, maxDelayMs: 30_000 };

interface AddressState {
  failures: number[];
  /** The earliest time the next attempt from this address is evaluated. */
  nextAt: number;
}

/**
 * Per address: after `threshold` failures within `windowMs`, attempts are serialized and
 * spaced by a delay that doubles with each failure, up to `maxDelayMs`; an attempt that would
 * have to wait longer than `maxDelayMs` is refused at once. Other addresses are unaffected.
 */
export class LoginThrottle {
  private readonly addresses = new Map<string, AddressState>();

  constructor(
    private readonly options: ThrottleOptions = DEFAULT_THROTTLE,
    private readonly now: () => number = Date.now,
  ) {}

  private recent(address: string): AddressState | undefined {
    const state = this.addresses.get(address);
    if (!state) return undefined;
    const since = this.now() - this.options.windowMs;
    while (state.failures.length > 0 && (state.failures[0] as number) <= since) state.failures.shift();
    if (state.failures.length === 0 && state.nextAt <= this.now()) {
      this.addresses.delete(address);
      return undefined;
    }
    return state;
  }

  private delayFor(failures: number): number {
    const over = failures - this.options.threshold;
    if (over < 0) return 0;
    return Math.min(this.options.baseDelayMs * 2 ** over, this.options.maxDelayMs);
  }

  /**
   * How long the attempt must wait before it is evaluated: 0 when not throttled, null when
   * it is refused outright (the queue from this address is already `maxDelayMs` long).
   */
  admit(address: string): number | null {
    const state = this.recent(address);
    if (!state || state.failures.length < this.options.threshold) return 0;
    const now = this.now();
    const start = Math.max(now, state.nextAt);
    const wait = start - now;
    if (wait > this.options.maxDelayMs) return null;
    // Reserve the slot after this one as if this attempt fails too: 1 s, 2 s, 4 s… apart.
    state.nextAt = start + this.delayFor(state.failures.length + 1);
    return wait;
  }

  fail(address: string): void {
    const state = this.recent(address) ?? { failures: [], nextAt: 0 };
    const now = this.now();
    state.failures.push(now);
    // Reaching the threshold (or failing again after the queue emptied) starts the wait.
    if (state.failures.length >= this.options.threshold && state.nextAt <= now) {
      state.nextAt = now + this.delayFor(state.failures.length);
    }
    this.addresses.set(address, state);
    if (this.addresses.size > 10_000) this.prune();
  }

  failures(address: string): number {
    return this.recent(address)?.failures.length ?? 0;
  }

  private prune(): void {
    for (const address of [...this.addresses.keys()]) this.recent(address);
  }
}
