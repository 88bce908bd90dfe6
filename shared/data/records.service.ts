// Records of materialized flat_table tables (spec Part 2 §4 "Data records"): list with field
// conditions, sort and pages; get, create (one, or many all-or-nothing), patch, delete by key,
// by ids or by filter. Plain SQL with bound parameters; identifiers only from the stored
// schema, quoted. Rows come back as plain objects (to_jsonb), timestamps as ISO strings.
// Site admins write; every site user reads. docs/data-tables.md "Records API".
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ServiceContext } from '../context.ts';
import { DomainError, fieldError, validationError, type FieldErrors } from '../errors.ts';
import { countOf, rows } from '../secrets/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { requireSiteAdmin, siteSchema } from '../tenancy/tenant-auth.ts';
import { findTable, type TableScope } from './datatable.service.ts';
import { coerceValue, columnsOf, compileFilter, parseQueryFilters, type ColumnInfo, type Filter } from './query/filter.ts';
import { recordValidator } from './record-validator.ts';
import { primaryKeyOf, quoteIdent, type TableSchema } from './table-schema.ts';

export type RecordRow = Record<string, unknown>;
export interface RecordPage {
  data: RecordRow[];
  total: number;
  page: number;
  page_size: number;
}

const DEFAULT_PAGE_SIZE = 20;
const MAX_PAGE_SIZE = 1000;
const MAX_BATCH = 1000;
const NOT_YET = ['populate', '_aggregate', '_group_by', 'search', 'unique_fields'];

interface Target {
  /** `"schema"."a1_table"`. */
  table: string;
  schema: TableSchema;
  hash: string;
  columns: Map<string, ColumnInfo>;
  pk: string[];
}

async function target(ctx: ServiceContext, scope: TableScope, name: string, write: boolean): Promise<Target> {
  const schema = write ? requireSiteAdmin(ctx) : siteSchema(ctx);
  const row = await findTable(ctx.em, schema, scope, name);
  if (row.provider_type !== 'flat_table') {
    throw new DomainError('BAD_REQUEST', `The records API serves flat_table tables only for now ("${name}" is ${row.provider_type}).`);
  }
  if (!row.is_materialized) throw new DomainError('BAD_REQUEST', `Data table "${name}" is not materialized.`);
  return {
    table: `${quotedSchema(schema)}.${quoteIdent(row.src_physical ?? row.physical_table_name)}`,
    schema: row.json_schema,
    hash: row.schema_hash.trim(),
    columns: columnsOf(row.json_schema),
    pk: primaryKeyOf(row.json_schema),
  };
}

/** A row as the API shows it: timestamps as ISO strings (to_jsonb gives `+00:00` offsets). */
function plain(t: Target, r: RecordRow): RecordRow {
  for (const [field, info] of t.columns) {
    const v = r[field];
    if (info.pgType === 'timestamptz' && typeof v === 'string') r[field] = new Date(v).toISOString();
  }
  return r;
}

const select = async (em: EntityManager, t: Target, sql: string, params: unknown[]): Promise<RecordRow[]> =>
  (await rows<{ r: RecordRow }>(em, sql, params)).map((x) => plain(t, x.r));

function positiveInt(name: string, raw: unknown, min: number): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const n = typeof raw === 'string' && /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < min) throw fieldError(name, `Expected an integer of at least ${min}.`);
  return n;
}

function orderBy(t: Target, raw: unknown): string {
  const keys: string[] = [];
  const seen = new Set<string>();
  if (raw !== undefined && raw !== '') {
    if (typeof raw !== 'string') throw fieldError('_sort', 'Expected a comma-separated list of fields.');
    for (const part of raw.split(',')) {
      const desc = part.startsWith('-');
      const field = desc ? part.slice(1) : part;
      if (!t.columns.has(field)) throw fieldError('_sort', `Unknown field "${field}".`);
      if (seen.has(field)) continue;
      seen.add(field);
      keys.push(`${quoteIdent(field)} ${desc ? 'DESC' : 'ASC'}`);
    }
  }
  for (const k of t.pk) if (!seen.has(k)) keys.push(`${quoteIdent(k)} ASC`); // stable pages
  return keys.join(', ');
}

/** The condition on the primary key of single-key tables; undefined when the value cannot be a key. */
function keyCondition(t: Target, id: string): Filter | undefined {
  if (t.pk.length !== 1) throw new DomainError('BAD_REQUEST', 'Records of tables with a composite primary key are not addressable by id yet.');
  const field = t.pk[0]!;
  try {
    coerceValue(field, t.columns.get(field)!, id);
  } catch {
    return undefined;
  }
  return { op: 'eq', field, value: id };
}

const recordNotFound = () => new DomainError('NOT_FOUND', 'Record not found.', { detail: 'Not found.' });

/** Every problem of a record: unknown fields and the validator's, keyed `{prefix}{field}`. */
function recordErrors(t: Target, record: unknown, prefix: string, out: FieldErrors): RecordRow | undefined {
  if (typeof record !== 'object' || record === null || Array.isArray(record)) {
    out[prefix ? prefix.slice(0, -1) : 'non_field_errors'] = ['Expected an object of field values.'];
    return undefined;
  }
  const rec = record as RecordRow;
  const before = Object.keys(out).length;
  for (const key of Object.keys(rec)) if (!t.columns.has(key)) (out[`${prefix}${key}`] ??= []).push(`Unknown field "${key}".`);
  const fn = recordValidator(t.schema, t.hash);
  if (!fn(rec)) {
    for (const e of fn.errors ?? []) {
      if (e.keyword === 'anyOf' || (e.keyword === 'type' && (e.params as { type: string }).type === 'null')) continue;
      const field = e.keyword === 'required' ? String((e.params as { missingProperty: string }).missingProperty) : (e.instancePath.split('/')[1] ?? 'non_field_errors');
      const text = e.keyword === 'required' ? 'This field is required.' : (e.message ?? 'is invalid');
      const list = (out[`${prefix}${field}`] ??= []);
      if (!list.includes(text)) list.push(text);
    }
  }
  return Object.keys(out).length === before ? rec : undefined;
}

function assignments(t: Target, rec: RecordRow): { cols: string[]; values: string[]; params: unknown[] } {
  const cols: string[] = [];
  const values: string[] = [];
  const params: unknown[] = [];
  for (const [field, v] of Object.entries(rec)) {
    const info = t.columns.get(field)!;
    cols.push(quoteIdent(field));
    values.push(`?::${info.pgType}`);
    params.push(v === null || v === undefined ? null : info.pgType === 'jsonb' ? JSON.stringify(v) : v);
  }
  return { cols, values, params };
}

interface PgError { code?: string; constraint?: string; detail?: string; column?: string; table?: string; message?: string }

function pgError(err: unknown): PgError | undefined {
  let e = err as (PgError & { cause?: unknown }) | undefined;
  let found: PgError | undefined;
  for (let depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) found = { ...found, ...Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) };
    e = e.cause as typeof e;
  }
  return found;
}

/** Schema fields named in a constraint violation (its detail's key list, else its constraint name). */
function fieldsOf(t: Target, pg: PgError): string[] {
  const key = pg.detail?.match(/^Key \((.*?)\)=/)?.[1];
  const names = [...t.columns.keys()];
  if (key) {
    const hits = names.filter((f) => new RegExp(`(^|[^a-z0-9_"])"?${f}"?($|[^a-z0-9_"])`).test(key));
    if (hits.length) return hits;
  }
  if (pg.column && t.columns.has(pg.column)) return [pg.column];
  const byName = names.filter((f) => pg.constraint?.includes(`_${f}_`) || pg.constraint?.endsWith(`_${f}`));
  return byName.length ? [byName.sort((x, y) => y.length - x.length)[0]!] : [];
}

/** Constraint violations as field-keyed 400/409 errors; never the raw database message. */
function violation(t: Target, err: unknown, prefix = ''): DomainError | undefined {
  const pg = pgError(err);
  if (!pg?.code) return undefined;
  const fields = fieldsOf(t, pg);
  const keyed = (text: string) => Object.fromEntries((fields.length ? fields : ['non_field_errors']).map((f) => [`${prefix}${f}`, [text]]));
  switch (pg.code) {
    case '23505':
      return new DomainError('DUPLICATE_ENTRY', 'A record with this value already exists.', { errors: keyed('A record with this value already exists.') });
    case '23503':
      return /still referenced/.test(pg.detail ?? '')
        ? new DomainError('CONFLICT', 'The record is still referenced by another table.', { errors: { [`${prefix}non_field_errors`]: ['The record is still referenced by another table.'] } })
        : validationError(keyed('The referenced record does not exist.'));
    case '23514':
      return validationError(keyed('The value violates a constraint of the table.'));
    case '23502':
      return validationError(keyed('This field may not be null.'));
    default:
      if (pg.code.startsWith('22')) return validationError(keyed('Invalid value for the field type.'));
      return undefined;
  }
}

async function guarded<T>(t: Target, work: () => Promise<T>, prefix = ''): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw violation(t, err, prefix) ?? err;
  }
}

const whereOf = (t: Target, tree: Filter) => compileFilter(tree, t.columns);

export const recordsService = {
  async list(ctx: ServiceContext, scope: TableScope, name: string, query: Record<string, unknown>): Promise<RecordPage> {
    const t = await target(ctx, scope, name, false);
    for (const p of NOT_YET) if (query[p] !== undefined) throw fieldError(p, `"${p}" is not supported yet.`);
    if (query.format !== undefined && query.format !== 'json') throw fieldError('format', 'Only format=json is supported yet.');
    const where = whereOf(t, parseQueryFilters(query, t.schema));
    const limit = positiveInt('limit', query.limit, 1);
    let pageSize: number;
    let offset: number;
    let page: number;
    if (limit !== undefined || query.offset !== undefined) {
      pageSize = Math.min(limit ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
      offset = positiveInt('offset', query.offset, 0) ?? 0;
      page = Math.floor(offset / pageSize) + 1;
    } else {
      pageSize = Math.min(positiveInt('page_size', query.page_size, 1) ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
      page = positiveInt('page', query.page, 1) ?? 1;
      offset = (page - 1) * pageSize;
    }
    const total = await guarded(t, () => countOf(ctx.em, `SELECT count(*) AS n FROM ${t.table} t WHERE ${where.sql}`, where.params));
    const data = await guarded(t, () => select(ctx.em, t, `SELECT to_jsonb(t) AS r FROM ${t.table} t WHERE ${where.sql} ORDER BY ${orderBy(t, query._sort)} LIMIT ? OFFSET ?`, [...where.params, pageSize, offset]));
    return { data, total, page, page_size: pageSize };
  },

  async get(ctx: ServiceContext, scope: TableScope, name: string, id: string): Promise<RecordRow> {
    const t = await target(ctx, scope, name, false);
    const cond = keyCondition(t, id);
    if (!cond) throw recordNotFound();
    const where = whereOf(t, cond);
    const [row] = await select(ctx.em, t, `SELECT to_jsonb(t) AS r FROM ${t.table} t WHERE ${where.sql}`, where.params);
    if (!row) throw recordNotFound();
    return row;
  },

  /** One record (an object) or many (an array, all or nothing). */
  async create(ctx: ServiceContext, scope: TableScope, name: string, body: unknown): Promise<RecordRow | RecordRow[]> {
    const t = await target(ctx, scope, name, true);
    const many = Array.isArray(body);
    const records = many ? (body as unknown[]) : [body];
    if (many && !records.length) throw fieldError('non_field_errors', 'Send at least one record.');
    if (records.length > MAX_BATCH) throw fieldError('non_field_errors', `At most ${MAX_BATCH} records per request.`);
    const errors: FieldErrors = {};
    const valid = records.map((r, i) => recordErrors(t, r, many ? `${i}.` : '', errors));
    if (Object.keys(errors).length) throw validationError(errors, many ? 'Invalid records: nothing was stored.' : 'Invalid record.');
    const created = await ctx.em.transactional(async (tx) => {
      const out: RecordRow[] = [];
      for (const [i, rec] of valid.entries()) {
        const a = assignments(t, rec!);
        const sql = a.cols.length
          ? `INSERT INTO ${t.table} AS t (${a.cols.join(', ')}) VALUES (${a.values.join(', ')}) RETURNING to_jsonb(t) AS r`
          : `INSERT INTO ${t.table} AS t DEFAULT VALUES RETURNING to_jsonb(t) AS r`;
        out.push(...(await guarded(t, () => select(tx as EntityManager, t, sql, a.params), many ? `${i}.` : '')));
      }
      return out;
    });
    return many ? created : created[0]!;
  },

  /** A partial update, validated as the whole record it produces. */
  async patch(ctx: ServiceContext, scope: TableScope, name: string, id: string, body: unknown): Promise<RecordRow> {
    const t = await target(ctx, scope, name, true);
    const cond = keyCondition(t, id);
    if (!cond) throw recordNotFound();
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw fieldError('non_field_errors', 'Expected an object of field values.');
    const patch = body as RecordRow;
    return ctx.em.transactional(async (tx) => {
      const em = tx as EntityManager;
      const where = whereOf(t, cond);
      const [current] = await select(em, t, `SELECT to_jsonb(t) AS r FROM ${t.table} t WHERE ${where.sql} FOR UPDATE`, where.params);
      if (!current) throw recordNotFound();
      const errors: FieldErrors = {};
      for (const key of Object.keys(patch)) if (!t.columns.has(key)) errors[key] = [`Unknown field "${key}".`];
      if (Object.keys(errors).length) throw validationError(errors, 'Invalid record.');
      // The merged record is validated; only the patched fields can be at fault (stored values
      // such as intervals come back in PostgreSQL's text form, not the schema's).
      recordErrors(t, { ...current, ...patch }, '', errors);
      const own = Object.fromEntries(Object.entries(errors).filter(([f]) => Object.hasOwn(patch, f)));
      if (Object.keys(own).length) throw validationError(own, 'Invalid record.');
      if (!Object.keys(patch).length) return current;
      const a = assignments(t, patch);
      const set = a.cols.map((c, i) => `${c} = ${a.values[i]}`).join(', ');
      const [row] = await guarded(t, () => select(em, t, `UPDATE ${t.table} AS t SET ${set} WHERE ${where.sql} RETURNING to_jsonb(t) AS r`, [...a.params, ...where.params]));
      return row!;
    });
  },

  async remove(ctx: ServiceContext, scope: TableScope, name: string, id: string): Promise<void> {
    const t = await target(ctx, scope, name, true);
    const cond = keyCondition(t, id);
    if (!cond) throw recordNotFound();
    const where = whereOf(t, cond);
    const gone = await guarded(t, () => rows(ctx.em, `DELETE FROM ${t.table} t WHERE ${where.sql} RETURNING 1`, where.params));
    if (!gone.length) throw recordNotFound();
  },

  /** DELETE on the collection: `ids=a,b` → {deleted, ids}; `filter=<JSON conditions>` → {deleted}. */
  async removeMany(ctx: ServiceContext, scope: TableScope, name: string, query: Record<string, unknown>): Promise<{ deleted: number; ids?: unknown[] }> {
    const t = await target(ctx, scope, name, true);
    if (typeof query.ids === 'string' && query.filter === undefined) {
      if (t.pk.length !== 1) throw new DomainError('BAD_REQUEST', 'ids needs a table with a single-field primary key.');
      const ids = query.ids.split(',').filter((x) => x !== '');
      if (!ids.length) throw fieldError('ids', 'Give at least one id.');
      const key = t.pk[0]!;
      const where = whereOf(t, { op: 'in', field: key, values: ids });
      const gone = await guarded(t, () => rows<{ k: unknown }>(ctx.em, `DELETE FROM ${t.table} t WHERE ${where.sql} RETURNING to_jsonb(t) -> ?::text AS k`, [...where.params, key]));
      return { deleted: gone.length, ids: gone.map((g) => g.k) };
    }
    if (typeof query.filter === 'string' && query.ids === undefined) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(query.filter);
      } catch {
        throw fieldError('filter', 'Expected a JSON object of field conditions.');
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw fieldError('filter', 'Expected a JSON object of field conditions.');
      if (!Object.keys(parsed).length) throw fieldError('filter', 'An empty filter would delete every record: refused.');
      const where = whereOf(t, parseQueryFilters(parsed as Record<string, unknown>, t.schema, false));
      const gone = await guarded(t, () => rows(ctx.em, `DELETE FROM ${t.table} t WHERE ${where.sql} RETURNING 1`, where.params));
      return { deleted: gone.length };
    }
    throw fieldError('non_field_errors', 'Give either ids=a,b or filter=<JSON conditions> (not both).');
  },
};
