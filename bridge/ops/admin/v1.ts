// The admin HTTP's /v1/ routes (listed in server.ts): each decodes the path and query, checks
// the method and calls the AdminApi, returning the JSON body of a 200.
import { HttpError } from '../../../contract/index.js';
import type { DeadLetter, DeadLetterPage, UsageReport } from '../../store/port.js';
import type { BudgetReport } from '../budgets-report.js';
import { pageQuery } from '../page-query.js';

/** What the operator API reaches; the composition root binds it to the store and broker. */
export interface AdminApi {
  /** One page of dead letters (oldest first) after the cursor, and how many are kept in all. */
  deadLetters(limit: number, after: string | undefined): Promise<DeadLetterPage & { count: number }>;
  /** One dead letter by its key (`deviceId/id`). */
  deadLetter(key: string): Promise<DeadLetter | undefined>;
  /** Replays the dead letters of `keys` (`deviceId/id`) or all; returns how many. */
  replay(keys: string[] | 'all'): Promise<number>;
  purge(): Promise<number>;
  usage(hours: number): Promise<UsageReport>;
  devices(): Array<{ deviceId: string | null; clientIds: string[] }>;
  budgets(): Promise<BudgetReport>;
}

/** Throws 405 unless the request's method is one of `allowed`. */
export type Only = (...allowed: string[]) => void;

/** Dead letters per page of GET /v1/dlq: by default, and at most. */
export const DLQ_PAGE = { default: 100, max: 1000 };
/** Usage is kept about 8 days. */
export const MAX_USAGE_HOURS = 192;
const SEGMENT = /^[A-Za-z0-9._:-]{1,128}$/;

/** Routes a /v1 path (the bearer token already checked) to its handler. */
export async function operatorApi(api: AdminApi, path: string, query: URLSearchParams, method: string, only: Only): Promise<unknown> {
  const segments = path.split('/').slice(2).map(decodeSegment); // after "", "v1"
  const [first, second, third, fourth] = segments;
  if (first === 'dlq' && segments.length === 1) return deadLetters(api, query, method, only);
  if (first === 'dlq' && second === 'replay' && segments.length === 2) {
    only('POST');
    return { replayed: await api.replay('all') };
  }
  if (first === 'dlq' && segments.length === 4 && fourth === 'replay' && second && third) return replayOne(api, `${second}/${third}`, only);
  if (first === 'dlq' && segments.length === 3 && second && third) return deadLetter(api, `${second}/${third}`, only);
  if (first === 'usage' && segments.length === 1) return usage(api, query, only);
  if (first === 'budgets' && segments.length === 1) {
    only('GET');
    return api.budgets();
  }
  if (first === 'devices' && segments.length === 1) {
    only('GET');
    const devices = api.devices();
    return { count: devices.length, devices };
  }
  throw new HttpError(404, 'not found');
}

/** GET lists a page of dead letters (`limit`, `after`: the `next` of the page before); DELETE purges them. */
async function deadLetters(api: AdminApi, query: URLSearchParams, method: string, only: Only): Promise<unknown> {
  only('GET', 'DELETE');
  if (method === 'DELETE') return { purged: await api.purge() };
  const { limit, after } = pageQuery(query, DLQ_PAGE);
  const page = await api.deadLetters(limit, after);
  return { count: page.count, entries: page.entries.map((letter) => ({ ...deadLetterFields(letter), request: letter.job.request })), next: page.next ?? null };
}

/** GET one dead letter with its request. */
async function deadLetter(api: AdminApi, key: string, only: Only): Promise<unknown> {
  only('GET');
  const letter = await api.deadLetter(key);
  if (!letter) throw new HttpError(404, `no dead letter ${key}`);
  return { entry: { ...deadLetterFields(letter), request: letter.job.request } };
}

function deadLetterFields({ job, reply, atMs }: DeadLetter) {
  return {
    key: job.key,
    deviceId: job.deviceId,
    id: job.id,
    priority: job.priority,
    at: new Date(atMs).toISOString(),
    error: reply.ok ? undefined : reply.error,
    attempts: job.attempts,
  };
}

async function replayOne(api: AdminApi, key: string, only: Only): Promise<unknown> {
  only('POST');
  const replayed = await api.replay([key]);
  if (replayed === 0) throw new HttpError(404, `no dead letter ${key}`);
  return { replayed };
}

async function usage(api: AdminApi, query: URLSearchParams, only: Only): Promise<unknown> {
  only('GET');
  const raw = query.get('hours');
  const hours = raw === null ? 24 : Number(raw);
  if (!Number.isInteger(hours) || hours < 1 || hours > MAX_USAGE_HOURS) {
    throw new HttpError(400, `hours must be an integer from 1 to ${MAX_USAGE_HOURS}`);
  }
  return { hours, ...(await api.usage(hours)) };
}

function decodeSegment(segment: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'bad percent-encoding in the path');
  }
  if (!SEGMENT.test(decoded)) throw new HttpError(404, 'not found');
  return decoded;
}
