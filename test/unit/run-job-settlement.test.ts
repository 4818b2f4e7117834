// The scheduler's side of RATE_LIMIT_TPM settlement: every upstream attempt's reservation is
// settled by what that attempt did (afterAttempt), and a call taken for no attempt counts 0.
// A fake upstream plays the chain's part (beforeAttempt, then afterAttempt per attempt).
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { BridgeError, type Reply } from '../../contract/index.js';
import { createLogger } from '../../bridge/logger.js';
import { NO_OBSERVER, NO_QUEUE_WAIT, type Upstream } from '../../bridge/scheduling/deps.js';
import { JobRunner, type RunDeps, type Running } from '../../bridge/scheduling/run-job.js';
import type { ClaimedJob } from '../../bridge/model/job.js';
import type { AttemptSpend } from '../../bridge/upstream/attempt-spend.js';
import type { UpstreamCall, UpstreamResult } from '../../bridge/upstream/call.js';

const ANSWER: UpstreamResult = {
  model: 'm',
  content: 'ok',
  finish_reason: 'stop',
  usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  attempts: 1,
  upstreamMs: 1,
  provider: 'primary',
};

/** Attempts as the chain would make them: each spent as given; then the answer, or `end` thrown. */
function upstreamOf(spends: AttemptSpend[], end?: BridgeError): Upstream {
  return {
    async call(req: UpstreamCall): Promise<UpstreamResult> {
      for (const [i, spent] of spends.entries()) {
        await req.beforeAttempt?.(i + 1);
        req.afterAttempt?.(spent);
      }
      if (end) throw end;
      return ANSWER;
    },
  };
}

/** Runs one job whose claim took call `c1`; retries take `c2`, `c3`… Returns the settlements made. */
async function run(upstream: Upstream): Promise<{ settled: Array<[string, number]>; reply: Reply | undefined }> {
  const settled: Array<[string, number]> = [];
  let taken = 1;
  let reply: Reply | undefined;
  const store = {
    limits: {
      takeRate: () => Promise.resolve({ ok: true, callId: `c${(taken += 1)}` }),
      settleTokens: (callId: string, tokens: number) => {
        settled.push([callId, tokens]);
        return Promise.resolve();
      },
    },
  };
  const deps = {
    config: { rateLimitTpm: 20_000, rateLimitRpm: 60, upstreamTimeoutMs: 1000, maxAttempts: 3, upstreamModel: 'm', cacheTtlS: 0, prices: {} },
    store,
    upstream,
    completion: { held: (_job: ClaimedJob, r: Reply) => void (reply = r) },
    logger: createLogger('silent'),
    clock: Date.now,
    observer: NO_OBSERVER,
    queueWait: NO_QUEUE_WAIT,
  } as unknown as RunDeps;
  const job = {
    id: 'r1',
    key: 'cam-1:r1',
    deviceId: 'cam-1',
    priority: 'normal',
    arrivalMs: Date.now(),
    attempts: 0,
    tokenEstimate: 9000,
    callId: 'c1',
    request: { id: 'r1', messages: [{ role: 'user', content: 'x' }] },
  } as unknown as ClaimedJob;
  const entry: Running = { job, callId: 'c1', abort: new AbortController(), leaseUntil: performance.now() + 60_000, leaseLost: false, done: Promise.resolve() };
  await new JobRunner(deps).execute(entry, Date.now(), undefined);
  await Promise.resolve();
  return { settled, reply };
}

describe('JobRunner: each attempt settles its own reservation', () => {
  it('a 429 on one key, then an answer: the refused attempt 0, the answered one its usage', async () => {
    const { settled, reply } = await run(upstreamOf(['nothing', 'usage']));
    expect(reply).toMatchObject({ ok: true });
    expect(settled).toEqual([
      ['c1', 0],
      ['c2', 15],
    ]);
  });

  it('a 500, then a timeout: the 500 settles 0, the timed-out attempt keeps its estimate', async () => {
    const { settled, reply } = await run(upstreamOf(['nothing', 'estimate'], new BridgeError('upstream_error', 'out of attempts')));
    expect(reply).toMatchObject({ ok: false, error: { code: 'upstream_error' } });
    expect(settled).toEqual([['c1', 0]]);
  });

  it('a timeout, then a 500: the timed-out attempt keeps its estimate, the 500 settles 0', async () => {
    const { settled } = await run(upstreamOf(['estimate', 'nothing'], new BridgeError('upstream_error', 'out of attempts')));
    expect(settled).toEqual([['c2', 0]]);
  });

  it('every attempt timed out: every estimate stays', async () => {
    const { settled, reply } = await run(upstreamOf(['estimate', 'estimate'], new BridgeError('upstream_timeout', 'no answer')));
    expect(reply).toMatchObject({ ok: false, error: { code: 'upstream_timeout' } });
    expect(settled).toEqual([]);
  });

  it('a call taken for an attempt that never went out (the deadline passed first) settles 0', async () => {
    const upstream: Upstream = {
      async call(req) {
        await req.beforeAttempt?.(1);
        req.afterAttempt?.('estimate');
        await req.beforeAttempt?.(2);
        throw new BridgeError('upstream_timeout', 'ttl_ms passed before the next attempt could start');
      },
    };
    const { settled } = await run(upstream);
    expect(settled).toEqual([['c2', 0]]);
  });

  it("a failure before any attempt (no provider available) settles the claim's call to 0", async () => {
    const { settled } = await run(upstreamOf([], new BridgeError('upstream_error', 'no provider available')));
    expect(settled).toEqual([['c1', 0]]);
  });
});
