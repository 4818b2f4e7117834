// A paged read of the dead letters, as /v1/dlq and the dashboard's /dashboard/api/dlq take it.
import { HttpError } from '../../contract/index.js';
import { fromCursor } from '../store/dead-letters.js';

/** `limit` (an integer from 1 to `sizes.max`, default `sizes.default`) and `after` (a cursor a page handed out). */
export function pageQuery(query: URLSearchParams, sizes: { default: number; max: number }): { limit: number; after: string | undefined } {
  const raw = query.get('limit');
  const limit = raw === null ? sizes.default : Number(raw);
  if (!Number.isInteger(limit) || limit < 1 || limit > sizes.max) throw new HttpError(400, `limit must be an integer from 1 to ${sizes.max}`);
  const after = query.get('after') ?? undefined;
  if (after !== undefined && fromCursor(after) === undefined) throw new HttpError(400, 'after must be the `next` of an earlier page');
  return { limit, after };
}
