// The Redis store's admission (lua/admit.lua): its keys and arguments, its answer, and the raw
// images that admission keeps once by hash (img:{sha256}) rather than inside each job record.
import type { Redis } from 'ioredis';
import { BridgeError } from '../../contract/index.js';
import type { RedisSpend } from './budget-spend.js';
import { recordJson, storedSize } from './job-size.js';
import type { LuaArg } from './lua-library.js';
import { toAdmitResult, toClaimResult } from './redis-codec.js';
import { lockId, type RedisKeys } from './redis-keys.js';
import type { AdmitLimits, AdmitResult, ClaimOptions } from './port.js';
import type { ClaimedJob, Job } from '../model/job.js';

/** A raw image's default age in Redis when the caller names none: a day, IDEMPOTENCY_TTL_S's default. */
const IMAGE_TTL_MS = 86_400_000;

/** What admit.lua gets for `job`: its record holds the image by hash, the image key its bytes. */
export function admitCall(
  k: RedisKeys,
  spend: RedisSpend,
  job: Job,
  limits: AdmitLimits,
  now: number,
  claim: ClaimOptions | undefined,
  cutoff: number | '',
): { keys: string[]; args: LuaArg[] } {
  const base64 = job.image?.base64;
  const json = recordJson(job);
  const keys = [k.idem(job.key), k.quota(job.deviceId)];
  if (job.cacheKey !== undefined) keys.push(k.cache(job.cacheKey));
  if (base64 !== undefined && job.image) keys.push(k.image(job.image.sha256));
  const reservation = spend.reservation(job.budget ?? []);
  keys.push(...reservation.keys);
  const args: LuaArg[] = [
    k.base,
    job.key,
    json,
    job.score,
    job.deadlineMs ?? '',
    job.priority,
    lockId(job.request.lock),
    job.tokenEstimate,
    limits.deviceRpm,
    limits.queueMax,
    now,
    job.cacheKey === undefined ? '0' : '1',
    cutoff,
    job.fairCost ?? 0,
    ...(claim ? [claim.owner, claim.max, claim.leaseMs, claim.rpm, claim.tpm ?? ''] : ['', '', '', '', '']),
    limits.queueMaxBytes ?? '',
    storedSize(job, json),
    base64 ?? '',
    limits.imageTtlMs ?? IMAGE_TTL_MS,
    reservation.keys.length,
    ...reservation.args,
  ];
  return { keys, args };
}

/** admit.lua's answer, the claim along it without images yet (withImages adds them). */
export function admitOutcome(result: [string, ...unknown[]], job: Job, claim: ClaimOptions | undefined): AdmitResult {
  if (result[0] === 'budget_exceeded') {
    const charge = job.budget?.[Number(result[1]) - 1];
    if (!charge) throw new BridgeError('internal', `admit refused an unknown budget charge ${String(result[1])}`);
    return { kind: 'budget_exceeded', charge, inFlight: result[2] === '1' };
  }
  if (result[0] !== 'queued' || !claim) return toAdmitResult(result as [string, string?], 'admit');
  const [, claimed, expired, retryAt, leadKind, leadValue] = result as [string, string[], string[], string, string, string];
  return {
    kind: 'queued',
    along: {
      claim: toClaimResult(claimed, expired, retryAt, claim.owner),
      lead: leadKind === 'leader' ? { leader: leadValue } : undefined,
    },
  };
}

/**
 * Claimed jobs get their images' bytes back, in one round trip; an image no longer kept (older
 * than IDEMPOTENCY_TTL_S, or a replayed dead letter's) stays without them, and the upstream
 * body refuses it (upstream/body.ts).
 */
export async function withImages(redis: Redis, k: RedisKeys, jobs: ClaimedJob[], admitted?: Job): Promise<void> {
  // The job just admitted and claimed along has its image at hand.
  for (const job of jobs) if (job.key === admitted?.key && admitted.image) job.image = admitted.image;
  const imaged = jobs.filter((j) => j.image !== undefined && j.image.base64 === undefined);
  if (imaged.length === 0) return;
  const pipeline = redis.pipeline();
  for (const job of imaged) pipeline.hget(k.image(job.image?.sha256 ?? ''), 'd');
  const bytes = ((await pipeline.exec()) ?? []).map(([, value]) => value as string | null);
  imaged.forEach((job, i) => {
    const base64 = bytes[i];
    if (job.image && base64 !== null && base64 !== undefined) job.image = { ...job.image, base64 };
  });
}
