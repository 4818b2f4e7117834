// The store benchmark's jobs, built the way intake builds them, and the replies they are
// completed with: realistic sizes and shapes, so the store's cost per job is what traffic pays.
import { DEFAULT_PRIORITY_OFFSETS_MS } from '../../bridge/config/config.js';
import type { InferRequest, Priority, Reply } from '../../contract/index.js';
import { jobKey, type Job } from '../../bridge/model/job.js';
import type { CompleteOptions } from '../../bridge/store/port.js';

/** A mixed priority stream, interleaved, so the queue orders work as it does under real traffic. */
const PRIORITY_MIX: Priority[] = ['critical', ...Array<Priority>(3).fill('high'), ...Array<Priority>(12).fill('normal'), ...Array<Priority>(4).fill('low')];

interface Blueprint {
  deviceId: string;
  priority: Priority;
  request: InferRequest;
  payloadBytes: number;
}

/** The i-th request of a run: a small chat request from one of `devices` devices. */
function blueprint(i: number, devices: number): Blueprint {
  const deviceId = `sensor-${String(i % devices).padStart(4, '0')}`;
  const request: InferRequest = {
    id: `req-${i}`,
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'You are a concise assistant for an industrial edge device. Answer in one sentence.' },
      {
        role: 'user',
        content: `Motor ${i % 17} reports ${(40 + (i % 30)).toFixed(1)} C and vibration ${((i % 70) / 10).toFixed(1)} mm/s. Is this within the normal operating range?`,
      },
    ],
    max_tokens: 128,
    temperature: 0.2,
    // Half the requests carry a deadline, so the deadlines index is exercised too.
    ...(i % 2 === 0 ? { ttl_ms: 300_000 } : {}),
  };
  return {
    deviceId,
    priority: PRIORITY_MIX[i % PRIORITY_MIX.length] ?? 'normal',
    request,
    payloadBytes: Buffer.byteLength(JSON.stringify(request)),
  };
}

/** The i-th job as Intake.admit builds it at arrival. */
export function jobFor(i: number, devices: number, arrivalMs: number): Job {
  const b = blueprint(i, devices);
  const { request } = b;
  return {
    key: jobKey(b.deviceId, request.id),
    deviceId: b.deviceId,
    id: request.id,
    priority: b.priority,
    request,
    arrivalMs,
    score: arrivalMs + DEFAULT_PRIORITY_OFFSETS_MS[b.priority],
    deadlineMs: request.ttl_ms === undefined ? undefined : arrivalMs + request.ttl_ms,
    tokenEstimate: Math.ceil(b.payloadBytes / 4) + (request.max_tokens ?? 256),
    attempts: 0,
  };
}

/** A plausible upstream answer, as the scheduler completes a job with. */
export function replyFor(job: Job, now: number): Reply {
  return {
    id: job.id,
    ok: true,
    model: 'gpt-4o-mini-2024-07-18',
    content: 'Yes: both temperature and vibration are within the normal range for this motor class; no action is needed.',
    finish_reason: 'stop',
    usage: { prompt_tokens: 61, completion_tokens: 24, total_tokens: 85 },
    cached: false,
    attempts: 1,
    priority: job.priority,
    timing: { queued_ms: now - job.arrivalMs, upstream_ms: 412, total_ms: now - job.arrivalMs + 412 },
  };
}

/** A request's completion bookkeeping, as the scheduler builds it: its cache entry, the end of its flight, its usage. */
export function requestBookkeeping(job: Job): Pick<CompleteOptions, 'cache' | 'unlead' | 'usage'> {
  if (job.cacheKey === undefined) return {};
  const answer = { model: 'gpt-4o-mini-2024-07-18', content: 'Yes: within the normal range.', finish_reason: 'stop' as const };
  return {
    cache: { key: job.cacheKey, answer, ttlMs: 300_000 },
    unlead: job.cacheKey,
    usage: { deviceId: job.deviceId, model: 'gpt-4o-mini', priority: job.priority, promptTokens: 61, completionTokens: 24, costUsd: 0.00002 },
  };
}
