// Finding: cost budgets are bypassed by naming an unpriced model. Any model a device named was
// sent upstream (over a template's too), and a model without a price cost 0, so a fleet's
// cost budget counted nothing of it. Now, while a budget counts cost, a model without a price
// (its own, or the default `*`) is refused at admission; with `onlyListedModels` only the
// models of CONFIG_FILE `models` may be named, each within its own max_tokens cap.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Reply } from '../../../contract/index.js';
import { http } from '../../helpers/admin-http.js';
import { ask, startHarness, type Harness } from '../../helpers/harness.js';
import { tempDir } from '../../helpers/security.js';
import { readUntil } from '../../helpers/wait.js';

const TOKEN = 'unpriced-test-token';
const PRICE = { inputPerMillion: 1000, outputPerMillion: 2000 };
const FLEET_USD = { limits: [{ name: 'fleet-usd', per: 'fleet', period: 'month', costUsd: 5 }] };

const errorOf = (reply: Reply | undefined): { code: string; message: string } => {
  if (!reply || reply.ok) throw new Error(`expected an error reply, got ${JSON.stringify(reply)}`);
  return reply.error;
};

/** What the fleet's cost budget has used (GET /v1/budgets), once the last request settled: it settles just after its reply. */
async function fleetSpent(h: Harness): Promise<number> {
  const fleetUse = async (): Promise<{ used: number; reserved: number } | undefined> => {
    const report = (await http(h.bridge, '/v1/budgets', { token: TOKEN })).json as {
      budgets: Array<{ name: string; use: Array<{ subject: string; used: number; reserved: number }> }>;
    };
    return report.budgets.find((b) => b.name === 'fleet-usd')?.use.find((u) => u.subject === '*');
  };
  const use = await readUntil(fleetUse, (u) => u !== undefined && u.reserved === 0, 5000, 20);
  return use?.used ?? 0;
}

describe('isolation: a model without a price under a cost budget', () => {
  const dir = tempDir('eab-unpriced-');
  let h: Harness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });
  afterAll(() => dir.remove());

  const start = async (file: unknown): Promise<Harness> => {
    const configFile = join(dir.path, `config-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(configFile, JSON.stringify(file));
    return startHarness({ CONFIG_FILE: configFile, ADMIN_TOKEN: TOKEN, UPSTREAM_MODEL: 'gpt-4o-mini' });
  };

  it("refuses a model without a price, over a template's too, and charges the innocent device's priced request", async () => {
    const template = { messages: [{ role: 'user', content: 'check part {{part}}' }], model: 'gpt-4o-mini' };
    h = await start({ prices: { 'gpt-4o-mini': PRICE }, budgets: FLEET_USD, templates: { check: template } });
    const attacker = await h.device('attacker');
    const innocent = await h.device('innocent');

    await attacker.publish('normal', ask('free', 'spend for nothing', { model: 'free-llm', max_tokens: 1000 }));
    const free = errorOf((await attacker.reply('free'))[0]);
    expect(free).toEqual({ code: 'invalid_request', message: 'model "free-llm" has no price (nor a default "*"), and budget "fleet-usd" counts cost' });
    await attacker.publish('normal', { id: 'tpl', template: 'check', vars: { part: 7 }, model: 'free-llm' });
    expect(errorOf((await attacker.reply('tpl'))[0]).code).toBe('invalid_request');

    await innocent.publish('normal', ask('i1', 'is part 7 ok?', { max_tokens: 50 }));
    const [answer] = await innocent.reply('i1', { timeoutMs: 5000 });
    expect(answer).toMatchObject({ id: 'i1', ok: true, model: 'gpt-4o-mini' });
    // The upstream saw no call of the attacker's, and the budget counts the innocent's cost.
    expect(h.upstream.requests.map((r) => (r.body as { model: string }).model)).toEqual(['gpt-4o-mini']);
    expect(await fleetSpent(h)).toBeGreaterThan(0);
  });

  it('with onlyListedModels, refuses a model not listed (naming the allowed ones) and charges a listed one at the default price', async () => {
    h = await start({
      models: { 'gpt-4o-mini': {}, llama: { maxTokens: 512 } },
      onlyListedModels: true,
      prices: { '*': PRICE },
      budgets: FLEET_USD,
    });
    const attacker = await h.device('attacker');

    await attacker.publish('normal', ask('other', 'spend elsewhere', { model: 'gpt-5' }));
    expect(errorOf((await attacker.reply('other'))[0])).toEqual({
      code: 'invalid_request',
      message: 'model "gpt-5" is not offered (allowed: "gpt-4o-mini", "llama")',
    });
    await attacker.publish('normal', ask('long', 'write a lot', { model: 'llama', max_tokens: 1000 }));
    expect(errorOf((await attacker.reply('long'))[0]).message).toBe('max_tokens: 1000 is over the cap of 512 (CONFIG_FILE models."llama".maxTokens)');
    expect(h.upstream.requests).toHaveLength(0);

    await attacker.publish('normal', ask('listed', 'a fair question', { model: 'llama', max_tokens: 100 }));
    const [answer] = await attacker.reply('listed', { timeoutMs: 5000 });
    expect(answer).toMatchObject({ id: 'listed', ok: true, model: 'llama' });
    expect(await fleetSpent(h)).toBeGreaterThan(0);
  });
});
