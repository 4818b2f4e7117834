// A job as a store keeps it: its data as JSON without its image's bytes (the Redis store keeps
// those once by hash), and the size QUEUE_MAX_BYTES counts for it, the same in both stores.
import type { Job } from '../model/job.js';

/** The job's data as its record holds it: without attempts (kept apart) and without the image's base64. */
export function recordJson(job: Job): string {
  const { attempts: _attempts, ...data } = job;
  return JSON.stringify(job.image?.base64 === undefined ? data : { ...data, image: { ...job.image, base64: undefined } });
}

/** Its record and its image's base64: an image is stored once, but counted for every job that carries it. */
export const storedSize = (job: Job, json = recordJson(job)): number => Buffer.byteLength(json) + (job.image?.base64?.length ?? 0);
