// exchange(): one HTTP exchange through undici's dispatch API, bounded by a deadline, against
// a scripted HTTP upstream.
import { afterEach, describe, expect, it } from 'vitest';
import { Pool } from 'undici';
import { exchange, type Exchange } from '../../bridge/upstream/exchange.js';
import { closeClientsAndUpstreams, scripted, type Scripted } from '../helpers/scripted-upstream.js';

afterEach(closeClientsAndUpstreams);

describe('exchange', () => {
  const post = { path: '/v1/chat/completions', method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: '{}' };

  /** A pool of ONE socket, held by an exchange the upstream never answers. */
  async function heldPool(): Promise<{ up: Scripted; pool: Pool; holder: { settled: Exchange | undefined }; release: AbortController }> {
    const up = await scripted([{ hang: true }, {}]);
    const pool = new Pool(new URL(up.url).origin, { connections: 1 });
    const release = new AbortController();
    const holder: { settled: Exchange | undefined } = { settled: undefined };
    void exchange(pool, post, 60_000, release.signal).then((e) => (holder.settled = e));
    await expect.poll(() => up.seen.length).toBe(1);
    return { up, pool, holder, release };
  }

  it('reads a whole answer with its status and headers', async () => {
    const up = await scripted([{ status: 201, headers: { 'retry-after': '3' }, body: { ok: true } }]);
    const pool = new Pool(new URL(up.url).origin);
    const result = await exchange(pool, post, 2000, undefined);
    expect(result).toMatchObject({ kind: 'response', status: 201, text: '{"ok":true}' });
    expect(result.kind === 'response' && result.headers['retry-after']).toBe('3');
    await pool.close();
  });

  it('times out while still waiting for a pooled socket, without waiting for the socket, and never sends', async () => {
    const { up, pool, holder, release } = await heldPool();
    const queued = await exchange(pool, post, 200, undefined);
    expect(queued).toEqual({ kind: 'timeout' });
    expect(holder.settled).toBeUndefined(); // the socket was never freed meanwhile
    release.abort();
    await expect.poll(() => holder.settled).toEqual({ kind: 'aborted' });
    // Once the socket frees, the given-up request is aborted before a byte of it is written.
    expect((await exchange(pool, post, 2000, undefined)).kind).toBe('response');
    expect(up.seen).toHaveLength(2);
    await pool.close();
  });

  it('ends with aborted when the outer signal fires while waiting for a socket', async () => {
    const { up, pool, holder, release } = await heldPool();
    const outer = new AbortController();
    const queued = exchange(pool, post, 60_000, outer.signal);
    outer.abort();
    expect(await queued).toEqual({ kind: 'aborted' });
    expect(holder.settled).toBeUndefined();
    release.abort();
    expect((await exchange(pool, post, 2000, undefined)).kind).toBe('response');
    expect(up.seen).toHaveLength(2);
    await pool.close();
  });

  it('reports a refused connection as an error', async () => {
    const up = await scripted([{}]);
    const origin = new URL(up.url).origin;
    await up.close();
    const pool = new Pool(origin);
    const result = await exchange(pool, post, 2000, undefined);
    expect(result.kind).toBe('error');
    expect(result.kind === 'error' && (result.error as Error & { code?: string }).code).toBe('ECONNREFUSED');
    await pool.close();
  });
});
