// The object list's filters (spec Part 3 §4 "List query parameters") and the legacy search, as
// one WHERE over storage_objects `o`, inside what the actor may read (access.ts readableObjects).
// Values are bound parameters; column names come from the fixed tables below only.
import type { EntityManager } from '@mikro-orm/postgresql';
import { parsePageRequest, pageOffset, type Page } from '../common/pagination.ts';
import { actorUuid, readsOf, type ServiceContext } from '../context.ts';
import { countOf, rows } from '../db/sql.ts';
import { likeEscape } from '../common/filters.ts';
import { validationError, type FieldErrors } from '../errors.ts';
import { plannedCount } from '../data/records/read.ts';
import type { SqlFragment } from '../data/query/filter.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { readableObjects, type ObjectRow } from './access.ts';
import type { BucketTarget } from './bucket.service.ts';
import { objectView, type ObjectView } from './object.service.ts';

export const OBJECT_PAGE_SIZE = 10;
export const OBJECT_MAX_PAGE_SIZE = 100;
const ORDERABLE: Record<string, string> = { created_at: 'o.created_at', updated_at: 'o.updated_at', size: 'o.size', filename: 'o.filename', path: 'o.path' };
const CATEGORIES = new Set(['image', 'video', 'audio', 'application', 'text']);

type Build = (v: string, ctx: ServiceContext, b: BucketTarget) => SqlFragment;

const text = (sql: string, pattern: (v: string) => string, op = 'ILIKE'): Build => (v) => ({ sql: `${sql} ${op} ? ESCAPE '\\'`, params: [pattern(v)] });
const contains = (col: string) => text(col, (v) => `%${likeEscape(v)}%`);
const startsWith = (col: string, op = 'LIKE') => text(col, (v) => `${likeEscape(v)}%`, op);

function integer(name: string, v: string): number {
  if (!/^\d{1,15}$/.test(v)) throw validationError({ [name]: ['Enter a whole number of bytes.'] });
  return Number(v);
}
function instant(name: string, v: string): string {
  if (!/^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d{1,6})?)?(Z|[+-]\d\d:?\d\d)?)?$/.test(v) || Number.isNaN(Date.parse(v.length === 10 ? `${v}T00:00:00Z` : v))) {
    throw validationError({ [name]: ['Enter a date (YYYY-MM-DD) or an ISO 8601 date-time.'] });
  }
  return v.length === 10 ? `${v}T00:00:00Z` : v;
}
function part(name: string, v: string, max: number): number {
  if (!/^\d{1,4}$/.test(v) || Number(v) < 1 || Number(v) > max) throw validationError({ [name]: [`Enter a number from 1 to ${max}.`] });
  return Number(v);
}
function bool(name: string, v: string): boolean {
  if (['true', '1', 'yes'].includes(v.toLowerCase())) return true;
  if (['false', '0', 'no'].includes(v.toLowerCase())) return false;
  throw validationError({ [name]: ['Enter true or false.'] });
}

const sizeOp = (op: string): Build => (v, _c, _b) => ({ sql: `o.size ${op} ?`, params: [integer('size', v)] });
const timeFilters = (col: string, name: string, after: string, before: string): Record<string, Build> => ({
  [`${name}__gte`]: (v) => ({ sql: `${col} >= ?::timestamptz`, params: [instant(`${name}__gte`, v)] }),
  [`${name}__lte`]: (v) => ({ sql: `${col} <= ?::timestamptz`, params: [instant(`${name}__lte`, v)] }),
  [`${name}__year`]: (v) => ({ sql: `extract(year FROM ${col} AT TIME ZONE 'UTC') = ?`, params: [part(`${name}__year`, v, 9999)] }),
  [`${name}__month`]: (v) => ({ sql: `extract(month FROM ${col} AT TIME ZONE 'UTC') = ?`, params: [part(`${name}__month`, v, 12)] }),
  [`${name}__day`]: (v) => ({ sql: `extract(day FROM ${col} AT TIME ZONE 'UTC') = ?`, params: [part(`${name}__day`, v, 31)] }),
  [after]: (v) => ({ sql: `${col} > ?::timestamptz`, params: [instant(after, v)] }),
  [before]: (v) => ({ sql: `${col} < ?::timestamptz`, params: [instant(before, v)] }),
});

/** Every filter of the list, by parameter name. */
const FILTERS: Record<string, Build> = {
  search: (v) => ({ sql: "(o.filename ILIKE ? ESCAPE '\\' OR o.path ILIKE ? ESCAPE '\\')", params: [`%${likeEscape(v)}%`, `%${likeEscape(v)}%`] }),
  file: (v) => ({ sql: 'o.path = ?', params: [v] }),
  file__startswith: startsWith('o.path'),
  prefix: startsWith('o.path'),
  file__icontains: contains('o.path'),
  file__istartswith: startsWith('o.path', 'ILIKE'),
  filename: (v) => ({ sql: 'o.filename = ?', params: [v] }),
  filename__icontains: contains('o.filename'),
  filename__istartswith: startsWith('o.filename', 'ILIKE'),
  filename__iendswith: text('o.filename', (v) => `%${likeEscape(v)}`),
  size__gte: sizeOp('>='),
  size__lte: sizeOp('<='),
  size__gt: sizeOp('>'),
  size__lt: sizeOp('<'),
  min_size: sizeOp('>='),
  max_size: sizeOp('<='),
  ...timeFilters('o.created_at', 'created_at', 'created_after', 'created_before'),
  created_at__date: (v) => {
    if (!/^\d{4}-\d\d-\d\d$/.test(v)) throw validationError({ created_at__date: ['Enter a date (YYYY-MM-DD).'] });
    return { sql: "(o.created_at AT TIME ZONE 'UTC')::date = ?::date", params: [instant('created_at__date', v).slice(0, 10)] };
  },
  ...timeFilters('o.updated_at', 'updated_at', 'modified_after', 'modified_before'),
  mimetype: (v) => ({ sql: 'o.mimetype = ?', params: [v.toLowerCase()] }),
  mimetype__icontains: contains('o.mimetype'),
  mimetype__istartswith: startsWith('o.mimetype', 'ILIKE'),
  mimetype__in: (v) => ({ sql: 'o.mimetype = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))', params: [JSON.stringify(v.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))] }),
  mimetype_category: (v) => {
    if (!CATEGORIES.has(v)) throw validationError({ mimetype_category: [`One of ${[...CATEGORIES].join(', ')}.`] });
    return { sql: 'o.mimetype LIKE ?', params: [`${v}/%`] };
  },
  visibility: (v, _c, b) => {
    if (v !== 'public' && v !== 'private') throw validationError({ visibility: ['One of public, private.'] });
    return { sql: 'coalesce(o.visibility, ?) = ?', params: [b.bucket.visibility, v] };
  },
  created_by_me: (v, ctx) => (bool('created_by_me', v) ? { sql: 'o.created_by = ?::uuid', params: [actorUuid(ctx)] } : { sql: 'o.created_by IS DISTINCT FROM ?::uuid', params: [actorUuid(ctx)] }),
  modified_by_me: (v, ctx) => (bool('modified_by_me', v) ? { sql: 'o.modified_by = ?::uuid', params: [actorUuid(ctx)] } : { sql: 'o.modified_by IS DISTINCT FROM ?::uuid', params: [actorUuid(ctx)] }),
  created_by: (v) => {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v)) throw validationError({ created_by: ["Enter a user's UUID."] });
    return { sql: 'o.created_by = ?::uuid', params: [v] };
  },
  created_by__username: (v, _c, b) => ({ sql: `o.created_by IN (SELECT u.uuid FROM ${quotedSchema(b.schema)}.users u WHERE u.username = ?)`, params: [v] }),
  created_by__username__icontains: (v, _c, b) => ({ sql: `o.created_by IN (SELECT u.uuid FROM ${quotedSchema(b.schema)}.users u WHERE u.username ILIKE ? ESCAPE '\\')`, params: [`%${likeEscape(v)}%`] }),
  metadata_search: (v) => ({ sql: "o.metadata::text ILIKE ? ESCAPE '\\'", params: [`%${likeEscape(v)}%`] }),
};
const PAGING = new Set(['page', 'page_size', 'ordering', '_count']);

export const OBJECT_LIST_PARAMETERS = [...Object.keys(FILTERS), ...PAGING];

function orderBy(raw: unknown): string {
  const ordering = typeof raw === 'string' && raw !== '' ? raw : '-created_at';
  const col = ORDERABLE[ordering.replace(/^-/, '')];
  if (!col) throw validationError({ ordering: [`Unknown ordering "${ordering}": one of ${Object.keys(ORDERABLE).join(', ')} (prefix - to descend).`] });
  const dir = ordering.startsWith('-') ? 'DESC' : 'ASC';
  return `${col} ${dir}, o.id ${dir}`;
}

export type CountMode = 'exact' | 'planned' | 'none';

/** The list of §4: filters, ordering, pages of at most 100 (default 10), the count as asked. */
export async function listObjects(
  ctx: ServiceContext,
  b: BucketTarget,
  query: Record<string, unknown>,
  count: CountMode,
): Promise<Omit<Page<ObjectView>, 'count'> & { count: number | null; hasNext: boolean }> {
  const errors: FieldErrors = {};
  for (const name of Object.keys(query)) if (!FILTERS[name] && !PAGING.has(name)) errors[name] = ['Unknown filter.'];
  if (Object.keys(errors).length) throw validationError(errors);
  const parts: SqlFragment[] = [{ sql: 'o.bucket_id = ?', params: [b.bucket.id] }, await readableObjects(ctx, b)];
  for (const [name, raw] of Object.entries(query)) {
    if (PAGING.has(name)) continue;
    const v = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (typeof v !== 'string' || v === '') continue;
    parts.push(FILTERS[name]!(v, ctx, b));
  }
  const where = { sql: parts.map((p) => `(${p.sql})`).join(' AND '), params: parts.flatMap((p) => p.params) };
  const request = parsePageRequest(query);
  const pageSize = Math.min(query.page_size === undefined ? OBJECT_PAGE_SIZE : request.pageSize, OBJECT_MAX_PAGE_SIZE);
  const page = { page: request.page === Number.MAX_SAFE_INTEGER ? 1 : request.page, pageSize };
  const em = readsOf(ctx);
  const q = quotedSchema(b.schema);
  const [total, found] = await Promise.all([
    count === 'exact' ? countOf(em, `SELECT count(*) AS n FROM ${q}.storage_objects o WHERE ${where.sql}`, where.params)
      : count === 'planned' ? plannedCount(em, `SELECT 1 FROM ${q}.storage_objects o WHERE ${where.sql}`, where.params) : null,
    // One row more than the page: whether there is a next page, whatever the count mode says.
    rows<ObjectRow>(em, `SELECT o.* FROM ${q}.storage_objects o WHERE ${where.sql} ORDER BY ${orderBy(query.ordering)} LIMIT ? OFFSET ?`, [...where.params, page.pageSize + 1, pageOffset(page)]),
  ]);
  const hasNext = found.length > page.pageSize;
  return { ...page, count: total, hasNext, results: found.slice(0, page.pageSize).map((o) => objectView(b, o)) };
}

const SEARCH_COLUMNS = new Set(['created_at', 'updated_at', 'size', 'filename']);

/** The legacy search (spec §4 `objects/search/`): prefix, search, sortBy, limit ≤ 1000, offset. */
export async function searchObjects(ctx: ServiceContext, b: BucketTarget, body: { prefix?: string; search?: string; sortBy?: { column?: string; order?: string }; limit?: number; offset?: number }): Promise<{ objects: ObjectView[]; count: number; bucket: string }> {
  const column = body.sortBy?.column ?? 'created_at';
  if (!SEARCH_COLUMNS.has(column)) throw validationError({ sortBy: [`column: one of ${[...SEARCH_COLUMNS].join(', ')}.`] });
  const order = (body.sortBy?.order ?? 'asc').toLowerCase();
  if (order !== 'asc' && order !== 'desc') throw validationError({ sortBy: ['order: asc or desc.'] });
  const limit = body.limit ?? 100;
  const offset = body.offset ?? 0;
  const parts: SqlFragment[] = [{ sql: 'o.bucket_id = ?', params: [b.bucket.id] }, await readableObjects(ctx, b)];
  if (body.prefix) parts.push(FILTERS.prefix!(body.prefix, ctx, b));
  if (body.search) parts.push(FILTERS.search!(body.search, ctx, b));
  const where = { sql: parts.map((p) => `(${p.sql})`).join(' AND '), params: parts.flatMap((p) => p.params) };
  const em: EntityManager = readsOf(ctx);
  const q = quotedSchema(b.schema);
  const [count, found] = await Promise.all([
    countOf(em, `SELECT count(*) AS n FROM ${q}.storage_objects o WHERE ${where.sql}`, where.params),
    rows<ObjectRow>(em, `SELECT o.* FROM ${q}.storage_objects o WHERE ${where.sql} ORDER BY o.${column} ${order.toUpperCase()}, o.id LIMIT ? OFFSET ?`, [...where.params, limit, offset]),
  ]);
  return { objects: found.map((o) => objectView(b, o)), count, bucket: b.bucket.slug };
}
