// Finding: one request blocks every device behind RATE_LIMIT_TPM. A huge max_tokens made an
// estimate larger than the whole TPM budget, which "ran alone": it stopped every claim of the
// fleet until the window was empty, then took it; at 1e14 its call id was written '1e+14' and
// never settled, and a call the upstream refused was never settled either. Now a max_tokens
// over MAX_TOKENS_CAP, or an estimate over RATE_LIMIT_TPM, is refused at admission, and a call
// the upstream refuses counts 0 in the window at once, as does each refused attempt of a
// retried request (a 429 on one key before another answers). Two instances on one Redis: the
// attacker on one, the innocent device on the other, answered within a few seconds.
import { afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../../contract/index.js';
import { readyz } from '../../helpers/chaos.js';
import { startFleet, type Fleet } from '../../helpers/fleet.js';
import { ask, type Harness } from '../../helpers/harness.js';
import { connectRedis } from '../../helpers/redis.js';
import { readUntil } from '../../helpers/wait.js';

const TPM = 20_000;
/** How long the innocent device may wait: the window would have held it for up to a minute. */
const INNOCENT_BOUND_MS = 5000;

const errorOf = (reply: Reply | undefined): { code: string; message: string } => {
  if (!reply || reply.ok) throw new Error(`expected an error reply, got ${JSON.stringify(reply)}`);
  return reply.error;
};

/** The tokens the fleet's upstream window holds now (lua/includes/window.lua's total). */
async function windowTokens(prefix: string): Promise<number> {
  const redis = connectRedis();
  try {
    return Number((await redis.hget(`{${prefix}}:budget`, 'w')) ?? '0');
  } finally {
    redis.disconnect();
  }
}

/** The window's tokens once under `limit` (settlements follow the replies), or what it holds after `timeoutMs`. */
function windowUnder(prefix: string, limit: number, timeoutMs = INNOCENT_BOUND_MS): Promise<number> {
  const tokens = (): Promise<number> => windowTokens(prefix);
  return readUntil(tokens, (t) => t < limit, timeoutMs, 20);
}

/** Polls the store until the window is empty; fails after `timeoutMs`. */
async function windowEmptied(prefix: string, timeoutMs: number): Promise<void> {
  const tokens = await windowUnder(prefix, 1, timeoutMs);
  if (tokens !== 0) throw new Error(`the window still holds ${tokens} tokens`);
}

async function answeredWithin(instance: Harness, deviceId: string, id: string, extra: Record<string, unknown>): Promise<number> {
  const innocent = await instance.device(deviceId);
  const sentAt = Date.now();
  await innocent.publish('normal', ask(id, `innocent ${id}`, extra));
  const [reply] = await innocent.reply(id, { timeoutMs: INNOCENT_BOUND_MS });
  expect(reply).toMatchObject({ id, ok: true });
  return Date.now() - sentAt;
}

describe("isolation: max_tokens and the fleet's TPM window", () => {
  let fleet: Fleet | undefined;
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
  });

  it('refuses a huge max_tokens and an estimate over RATE_LIMIT_TPM at admission; the innocent device on the other instance is answered', async () => {
    fleet = await startFleet(2, { RATE_LIMIT_TPM: String(TPM) });
    const [one, two] = fleet.instances as [Harness, Harness];
    const attacker = await one.device('attacker');

    await attacker.publish('normal', ask('huge', 'write forever', { max_tokens: 1e14 }));
    const huge = errorOf((await attacker.reply('huge'))[0]);
    expect(huge.code).toBe('invalid_request');
    expect(huge.message).toBe('max_tokens: 100000000000000 is over the cap of 16384 (MAX_TOKENS_CAP)');

    // Under the cap, but eight choices of it are more than the whole minute's budget.
    await attacker.publish('normal', ask('wide', 'write a lot', { max_tokens: 16_000, n: 8 }));
    const wide = errorOf((await attacker.reply('wide'))[0]);
    expect(wide.code).toBe('invalid_request');
    expect(wide.message).toMatch(/^max_tokens: 16000 × n 8 with a prompt of ~\d+ tokens is \d+ tokens, over RATE_LIMIT_TPM \(20000\)/);

    await answeredWithin(two, 'innocent', 'i1', { max_tokens: 100 });
    expect([await readyz(one.bridge.httpPort), await readyz(two.bridge.httpPort)]).toEqual([200, 200]);
    // The upstream saw the innocent's call only; the window holds nothing of the attacker's.
    expect(fleet.upstream.requests).toHaveLength(1);
    expect(await windowTokens(fleet.prefix)).toBeLessThan(1000);
  });

  it('settles a call the upstream refused to 0, so the next large request of another device goes at once', async () => {
    fleet = await startFleet(2, { RATE_LIMIT_TPM: String(TPM) });
    const [one, two] = fleet.instances as [Harness, Harness];
    const attacker = await one.device('attacker');

    // Within every bound, but refused by the upstream after the claim took its 16 000 tokens.
    fleet.upstream.script({ status: 400 });
    await attacker.publish('normal', ask('refused', 'an impossible request', { max_tokens: 16_000 }));
    expect((await attacker.reply('refused'))[0]).toMatchObject({ id: 'refused', ok: false });
    expect(fleet.upstream.requests).toHaveLength(1);
    const { prefix } = fleet;
    await windowEmptied(prefix, INNOCENT_BOUND_MS);

    // 16 000 more would not fit beside an unsettled 16 000 in a 20 000 window for a minute.
    await answeredWithin(two, 'innocent', 'i2', { max_tokens: 16_000 });
    expect(fleet.upstream.requests).toHaveLength(2);
  });

  it('settles each attempt of a retried request by what it did: a 429 on one key holds nothing once another key answered', async () => {
    fleet = await startFleet(2, { RATE_LIMIT_TPM: String(TPM), UPSTREAM_API_KEYS: 'sk-one,sk-two' });
    const [one, two] = fleet.instances as [Harness, Harness];
    const attacker = await one.device('attacker');

    // The first key is refused (429, cooling for 30 s); the call moves on at once to the other
    // key, which takes its own 9 000 tokens from the window and answers.
    fleet.upstream.script({ status: 429, retryAfterS: 30 });
    await attacker.publish('normal', ask('retried', 'is the belt running?', { max_tokens: 9000 }));
    expect((await attacker.reply('retried'))[0]).toMatchObject({ id: 'retried', ok: true });
    expect(fleet.upstream.requests).toHaveLength(2);
    const keys = fleet.upstream.requests.map((r) => r.headers['authorization']);
    expect(new Set(keys).size).toBe(2);
    // Only the answer's real usage stays; the refused attempt's 9 000 held it for a minute before.
    const { prefix } = fleet;
    expect(await windowUnder(prefix, 1000)).toBeLessThan(1000);

    // 16 000 more would not fit beside an unsettled 9 000 in a 20 000 window.
    await answeredWithin(two, 'innocent', 'i3', { max_tokens: 16_000 });
  });

  it('settles to 0 the call of a request answered by an identical one in flight', async () => {
    fleet = await startFleet(2, { RATE_LIMIT_TPM: String(TPM) }, { latencyMs: 300 });
    const [one, two] = fleet.instances as [Harness, Harness];
    const [a, b] = [await one.device('cam-a'), await two.device('cam-b')];
    // Both claimed at once (5 000 each fits twice), one calls and the other follows its flight.
    const same = ask('same', 'is the belt running?', { max_tokens: 5000 });
    await Promise.all([a.publish('normal', same), b.publish('normal', same)]);
    expect((await a.reply('same'))[0]).toMatchObject({ ok: true });
    expect((await b.reply('same'))[0]).toMatchObject({ ok: true });
    expect(fleet.upstream.requests).toHaveLength(1);
    // The leader's call holds what it used; the follower's holds nothing.
    const { prefix } = fleet;
    expect(await windowUnder(prefix, 1000)).toBeLessThan(1000);
  });
});
