// CONFIG_FILE `models` (the models devices may name, each with its max_tokens cap) and
// `prices` (with `*` as the default price), checked at load; and a request's estimate with the
// bounds intake keeps: the cap, RATE_LIMIT_TPM, the allowlist, a price while a budget counts cost.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../bridge/config/config.js';
import { priceOf } from '../../bridge/config/models.js';
import { estimateOf } from '../../bridge/intake/estimate.js';
import { BridgeError, type InferRequest } from '../../contract/index.js';

const dir = mkdtempSync(join(tmpdir(), 'models-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const load = (file: unknown, env: Record<string, string> = {}): Config => {
  const path = join(dir, `m${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, JSON.stringify(file));
  return loadConfig({ CONFIG_FILE: path, ...env });
};

const fleetCost = { limits: [{ name: 'fleet-usd', per: 'fleet', period: 'month', costUsd: 100 }] };
const price = { inputPerMillion: 1, outputPerMillion: 2 };

describe('models and prices in CONFIG_FILE', () => {
  it('reads a model with its provider, target and max_tokens cap, and a default price', () => {
    const config = load({
      providers: [{ name: 'cheap', url: 'http://127.0.0.1:9/v1' }],
      models: { 'gpt-4o-mini': { maxTokens: 8192 }, llama: { provider: 'cheap', model: 'llama-3.1-8b', maxTokens: 2048 } },
      onlyListedModels: true,
      prices: { '*': price, 'gpt-4o-mini': { inputPerMillion: 0.15, outputPerMillion: 0.6 } },
      budgets: fleetCost,
    });
    expect(config.file.models['llama']).toEqual({ provider: 'cheap', model: 'llama-3.1-8b', maxTokens: 2048 });
    expect(config.file.onlyListedModels).toBe(true);
    expect(priceOf(config.file.prices, 'llama')).toEqual(price);
  });

  it('stops the start naming the path of a bad cap or an unknown field', () => {
    expect(() => load({ models: { m: { maxTokens: 0 } } })).toThrow(/models\.m\.maxTokens/);
    expect(() => load({ models: { m: { maxTokens: 1.5 } } })).toThrow(/models\.m\.maxTokens/);
    expect(() => load({ models: { m: { max_tokens: 10 } } })).toThrow(/models\.m: .*max_tokens/);
    expect(() => load({ onlyListedModels: 'yes' })).toThrow(/onlyListedModels/);
  });

  it('with onlyListedModels, refuses a template naming a model that is not listed', () => {
    const template = { messages: [{ role: 'user', content: 'hi' }], model: 'gpt-4o', priority_route: { low: 'tiny' } };
    const file = { models: { 'gpt-4o': {} }, onlyListedModels: true, templates: { t: template } };
    expect(() => load(file)).toThrow(/templates\.t\.priority_route\.low: model "tiny" is not in `models`/);
    expect(() => load({ ...file, models: { 'gpt-4o': {}, tiny: {} } })).not.toThrow();
  });

  it('with a cost budget, refuses a listed or budgeted model without a price, and UPSTREAM_MODEL without one', () => {
    const upstream = { UPSTREAM_MODEL: 'gpt-4o-mini' };
    const priced = { 'gpt-4o-mini': price };
    expect(() => load({ models: { llama: {} }, onlyListedModels: true, prices: priced, budgets: fleetCost }, upstream)).toThrow(
      /models\.llama: model "llama" has no price .* budget "fleet-usd" counts cost/,
    );
    const perModel = { limits: [{ name: 'big', per: 'model', model: 'gpt-4o', period: 'day', costUsd: 5 }] };
    expect(() => load({ prices: priced, budgets: perModel }, upstream)).toThrow(/budgets\.limits\.0\.model: model "gpt-4o" has no price/);
    expect(() => load({ budgets: fleetCost }, upstream)).toThrow(/prices: UPSTREAM_MODEL "gpt-4o-mini" has no price/);
    // A default price covers them all; without a cost budget nothing needs one.
    expect(() => load({ models: { llama: {} }, onlyListedModels: true, prices: { '*': price }, budgets: fleetCost }, upstream)).not.toThrow();
    expect(() => load({ models: { llama: {} }, onlyListedModels: true }, upstream)).not.toThrow();
  });

  it('refuses a template whose max_tokens is over the cap of a model it goes to', () => {
    const template = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4000, priority_route: { low: 'tiny' } };
    expect(() => load({ models: { tiny: { maxTokens: 1000 } }, templates: { t: template } })).toThrow(
      /templates\.t\.max_tokens: 4000 is over the cap of 1000 for model "tiny"/,
    );
    expect(() => load({ templates: { t: { ...template, priority_route: undefined } } }, { MAX_TOKENS_CAP: '3000' })).toThrow(
      /templates\.t\.max_tokens: 4000 is over the cap of 3000 for model "gpt-4o-mini"/,
    );
    expect(() => load({ templates: { t: { ...template, priority_route: undefined } } })).not.toThrow();
  });

  it('prices an answer by the model that answered, else the model asked for, else the default', () => {
    const prices = { 'gpt-4o': price, '*': { inputPerMillion: 9, outputPerMillion: 9 } };
    expect(priceOf(prices, 'gpt-4o-2024-08-06', 'gpt-4o')).toEqual(price);
    expect(priceOf(prices, 'other')?.inputPerMillion).toBe(9);
    expect(priceOf({}, 'constructor')).toBeUndefined();
  });
});

describe('a request estimate and its bounds', () => {
  const base = load({}, { UPSTREAM_MODEL: 'gpt-4o-mini' });
  const chat = (fields: Record<string, unknown>): InferRequest => ({ id: 'r1', messages: [{ role: 'user', content: 'hi' }], ...fields }) as InferRequest;
  const refusal = (f: () => unknown): string => {
    try {
      f();
    } catch (err) {
      if (err instanceof BridgeError && err.code === 'invalid_request') return err.message;
      throw err;
    }
    throw new Error('expected invalid_request');
  };

  it('is size / 4 in and max_tokens (or max_completion_tokens, or 256) times n out', () => {
    expect(estimateOf(chat({ max_tokens: 100, n: 3 }), 41, base)).toEqual({ prompt: 11, completion: 300 });
    expect(estimateOf(chat({ max_tokens: 100, max_completion_tokens: 50 }), 40, base)).toEqual({ prompt: 10, completion: 50 });
    expect(estimateOf(chat({}), 4, base)).toEqual({ prompt: 1, completion: 256 });
    expect(estimateOf({ id: 'e', input: 'x' } as InferRequest, 8, base)).toEqual({ prompt: 2, completion: 0 });
  });

  it("refuses max_tokens or max_completion_tokens over MAX_TOKENS_CAP, or over the model's own cap, naming the field and the limit", () => {
    expect(base.maxTokensCap).toBe(16_384);
    expect(estimateOf(chat({ max_tokens: 16_384 }), 10, base).completion).toBe(16_384);
    expect(refusal(() => estimateOf(chat({ max_tokens: 16_385 }), 10, base))).toBe('max_tokens: 16385 is over the cap of 16384 (MAX_TOKENS_CAP)');
    expect(refusal(() => estimateOf(chat({ max_completion_tokens: 1e9 }), 10, base))).toMatch(/^max_completion_tokens: 1000000000 is over the cap of 16384/);
    const own = load({ models: { big: { maxTokens: 100_000 }, small: { maxTokens: 64 } } }, { UPSTREAM_MODEL: 'small' });
    expect(estimateOf(chat({ model: 'big', max_tokens: 50_000 }), 10, own).completion).toBe(50_000);
    expect(refusal(() => estimateOf(chat({ max_tokens: 65 }), 10, own))).toBe('max_tokens: 65 is over the cap of 64 (CONFIG_FILE models."small".maxTokens)');
  });

  it('refuses an estimate over RATE_LIMIT_TPM, which one call could only take by stopping every other', () => {
    const tpm = load({}, { RATE_LIMIT_TPM: '10000' });
    expect(estimateOf(chat({ max_tokens: 9000 }), 400, tpm).completion).toBe(9000);
    expect(refusal(() => estimateOf(chat({ max_tokens: 2000, n: 5 }), 400, tpm))).toBe(
      'max_tokens: 2000 × n 5 with a prompt of ~100 tokens is 10100 tokens, over RATE_LIMIT_TPM (10000), which one call may use at most',
    );
    expect(refusal(() => estimateOf({ id: 'e', input: 'x'.repeat(50_000) } as InferRequest, 50_020, tpm))).toMatch(
      /^input: its estimate of 12505 tokens is over RATE_LIMIT_TPM \(10000\)/,
    );
  });

  it('with onlyListedModels, refuses a model not listed and names at most ten allowed ones', () => {
    const models = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`m${i}`, {}]));
    const listed = load({ models, onlyListedModels: true });
    expect(estimateOf(chat({ model: 'm11' }), 10, listed).prompt).toBe(3);
    expect(estimateOf(chat({}), 10, listed).prompt).toBe(3); // the default model is the operator's choice
    const message = refusal(() => estimateOf(chat({ model: 'x'.repeat(256) }), 10, listed));
    expect(message).toMatch(/^model "x+" is not offered \(allowed: "m0", "m1", .*"m9" and 2 more\)$/);
    expect(refusal(() => estimateOf(chat({ model: 'constructor' }), 10, load({ onlyListedModels: true })))).toBe(
      'model "constructor" is not offered (none may be named: leave `model` out)',
    );
    // Without onlyListedModels any model may be named.
    expect(estimateOf(chat({ model: 'anything' }), 10, base).prompt).toBe(3);
  });

  it('while a budget counts cost, refuses a model without a price (own or default)', () => {
    const priced = load({ prices: { 'gpt-4o-mini': price }, budgets: fleetCost }, { UPSTREAM_MODEL: 'gpt-4o-mini' });
    const budgets = priced.file.budgets;
    expect(refusal(() => estimateOf(chat({ model: 'free-model' }), 10, priced, budgets))).toBe(
      'model "free-model" has no price (nor a default "*"), and budget "fleet-usd" counts cost',
    );
    expect(estimateOf(chat({}), 10, priced, budgets).prompt).toBe(3);
    const tokensOnly = load({ budgets: { limits: [{ name: 't', per: 'fleet', period: 'day', tokens: 10 }] } });
    expect(estimateOf(chat({ model: 'free-model' }), 10, tokensOnly, tokensOnly.file.budgets).prompt).toBe(3);
  });
});
