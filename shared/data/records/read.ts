// Reading records: the list query (conditions, keyword search, sort, pages), relation
// population and aggregates. Everything compiles to bound SQL over the expressions of
// target.ts. docs/data-tables.md "Records API".
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ServiceContext } from '../../context.ts';
import { fieldError } from '../../errors.ts';
import { countOf, preparedRows, quoteIdent, rows } from '../../db/sql.ts';
import { searchVector } from '../ddl.ts';
import { fromStored } from '../field-types.ts';
import { compileFilter, parseQueryFilters, type ColumnInfo, type Filter, type SqlFragment } from '../query/filter.ts';
import type { RecordPage } from '../records.schemas.ts';
import type { Field, TableSchema } from '../table-schema.ts';
import { NO_ROWS, withinAllowed } from './access.ts';
import { fieldSql, loadRelations, needsRelations, resolver, sortExpression, type RecordRow, type Relation, type Target, type TableView } from './target.ts';

const DEFAULT_PAGE_SIZE = 20;
/** Related records per parent and per reverse or many-to-many relation that populate adds. */
export const POPULATE_LIMIT = 100;
const MAX_PAGE_SIZE = 1000;
const MAX_SEARCH_WORDS = 10;

export interface Page {
  limit: number;
  offset: number;
  page: number;
  pageSize: number;
}

function positiveInt(name: string, raw: unknown, min: number): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const n = typeof raw === 'string' && /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(n) || n < min) throw fieldError(name, `Expected an integer of at least ${min}.`);
  return n;
}

/** page/page_size (default 20, at most 1000) or limit/offset. */
export function pageOf(query: Record<string, unknown>): Page {
  const limit = positiveInt('limit', query.limit, 1);
  if (limit !== undefined || query.offset !== undefined) {
    const pageSize = Math.min(limit ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
    const offset = positiveInt('offset', query.offset, 0) ?? 0;
    return { limit: pageSize, offset, page: Math.floor(offset / pageSize) + 1, pageSize };
  }
  const pageSize = Math.min(positiveInt('page_size', query.page_size, 1) ?? DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  const page = positiveInt('page', query.page, 1) ?? 1;
  return { limit: pageSize, offset: (page - 1) * pageSize, page, pageSize };
}

const byName = new WeakMap<TableSchema, Map<string, Field>>();
function fieldsByName(schema: TableSchema): Map<string, Field> {
  let m = byName.get(schema);
  if (!m) byName.set(schema, (m = new Map(schema.fields.map((f) => [f.name, f]))));
  return m;
}

/**
 * A record as the API shows it: fields in schema order (jsonb orders keys by length), document
 * fields beyond the schema after them; flat timestamps as ISO strings (to_jsonb gives `+00:00`).
 */
export function plain(v: TableView, r: RecordRow): RecordRow {
  const flat = v.provider === 'flat_table';
  const fields = fieldsByName(v.schema);
  const out: RecordRow = {};
  for (const [field, info] of v.columns) {
    if (!flat && !Object.hasOwn(r, field)) continue;
    const value = r[field];
    out[field] = flat && info.pgType === 'timestamptz' && typeof value === 'string' ? new Date(value).toISOString() : fromStored(fields.get(field), value);
  }
  if (!flat) for (const k of Object.keys(r)) if (!Object.hasOwn(out, k)) out[k] = r[k];
  return out;
}

/** Records of a read (`r`: a record as recordSql gives it); prepared outside transactions (db/sql.ts). */
export const selectRecords = async (em: EntityManager, v: TableView, sql: string, params: unknown[]): Promise<RecordRow[]> =>
  (await preparedRows<{ r: RecordRow }>(em, sql, params)).map((x) => plain(v, x.r));

/** The planner's estimate of a query's rows (EXPLAIN: nothing is read). */
export async function plannedCount(em: EntityManager, sql: string, params: unknown[]): Promise<number> {
  const [row] = await rows<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }>(em, `EXPLAIN (FORMAT JSON) ${sql}`, params);
  return Math.round(row?.['QUERY PLAN'][0].Plan['Plan Rows'] ?? 0);
}

/** `search=keywords`: every word as a prefix, over the table's full-text index. */
function searchCondition(t: Target, raw: unknown): SqlFragment | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (typeof raw !== 'string') throw fieldError('search', 'Expected one keyword string.');
  const words = (raw.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).slice(0, MAX_SEARCH_WORDS);
  if (!words.length) throw fieldError('search', 'Give at least one word (letters or digits).');
  const vector = searchVector(t.provider, t.schema, (name) => `t.${quoteIdent(name)}`);
  if (!vector) throw fieldError('search', `Data table "${t.name}" has no text field to search.`);
  return { sql: `${vector} @@ to_tsquery('simple', ?)`, params: [words.map((w) => `${w}:*`).join(' & ')] };
}

/** The WHERE fragment of a query: its field conditions and keyword search, within the rows the actor may read. */
async function whereOf(em: EntityManager, t: Target, query: Record<string, unknown>, reserved = true): Promise<SqlFragment> {
  if (needsRelations(query)) await loadRelations(em, t);
  const where = compileFilter(parseQueryFilters(query, resolver(t), reserved), resolver(t));
  const search = reserved ? searchCondition(t, query.search) : undefined;
  return withinAllowed(t.readable, search ? { sql: `${where.sql} AND ${search.sql}`, params: [...where.params, ...search.params] } : where);
}

export const compileOn = (t: Target, tree: Filter): SqlFragment => compileFilter(tree, resolver(t));

/**
 * ORDER BY of `_sort` (comma list, `-` descending), ended by the key for stable pages, in the
 * direction of the last sort key: with the key-extended indexes of ddl.ts a page is then read
 * straight off an index, forwards or backwards.
 */
export function orderOf(t: Target, raw: unknown): string {
  const keys: string[] = [];
  const seen = new Set<string>();
  let direction = 'ASC';
  if (raw !== undefined && raw !== '') {
    if (typeof raw !== 'string') throw fieldError('_sort', 'Expected a comma-separated list of fields.');
    for (const part of raw.split(',')) {
      const desc = part.startsWith('-');
      const field = desc ? part.slice(1) : part;
      if (seen.has(field)) continue;
      seen.add(field);
      direction = desc ? 'DESC' : 'ASC';
      keys.push(`${sortExpression(t, field)} ${direction}`);
    }
  }
  for (const k of t.pk) if (!seen.has(k)) keys.push(`${t.columns.get(k)!.sql} ${direction}`);
  return keys.join(', ');
}

/** The list's SQL pieces, shared by the JSON list and the CSV export. */
export async function listQuery(em: EntityManager, t: Target, query: Record<string, unknown>): Promise<{ where: SqlFragment; orderBy: string }> {
  const where = await whereOf(em, t, query);
  return { where, orderBy: orderOf(t, query._sort) };
}

// --- populate --------------------------------------------------------------------------------

const keyOf = (v: unknown) => (v === null || v === undefined ? undefined : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** Relation names of `populate` (comma list or `*`). */
function populated(t: Target, raw: unknown): Relation[] {
  if (typeof raw !== 'string' || raw === '') throw fieldError('populate', 'Expected a comma-separated list of relations or *.');
  const all = t.relations!;
  if (raw === '*') return [...all.values()];
  const out: Relation[] = [];
  for (const name of new Set(raw.split(','))) {
    const rel = all.get(name);
    if (!rel) throw fieldError('populate', `Unknown relation "${name}" (relations: ${[...all.keys()].join(', ') || 'none'}).`);
    out.push(rel);
  }
  return out;
}

/**
 * Replaces each forward foreign key by the record it references (null when none) and adds each
 * reverse or many-to-many relation as an array of its first POPULATE_LIMIT records by key, one
 * query per relation.
 */
export async function populate(ctx: ServiceContext, t: Target, records: RecordRow[], raw: unknown): Promise<void> {
  const em = ctx.em;
  await loadRelations(em, t);
  for (const rel of populated(t, raw)) {
    const keys = [...new Set(records.map((r) => r[rel.local]).filter((k) => k !== null && k !== undefined))];
    const found = new Map<string, RecordRow[]>();
    // Only the related records the related table's own policies let the caller read.
    const readable = keys.length ? rel.readable! : NO_ROWS;
    if (keys.length && readable !== NO_ROWS) {
      const { other, junction: j } = rel;
      const match: ColumnInfo = j ? j.view.columnsAs('j').get(j.toUs)! : other.columnsAs('r').get(rel.remote)!;
      const list = keys.map(() => `?::${match.pgType}`).join(', ');
      const from = j ? `${j.view.table} j JOIN ${other.table} r ON ${fieldSql(other, 'r', rel.remote)} = ${fieldSql(j.view, 'j', j.toOther)}` : `${other.table} r`;
      const order = other.pk.map((k) => `${fieldSql(other, 'r', k)} ASC`).join(', ');
      const params = [...keys.map((k) => (typeof k === 'object' ? JSON.stringify(k) : k)), ...readable.params];
      // The first POPULATE_LIMIT related records of each parent, by key: ranked in SQL, never all loaded.
      const ranked = `SELECT ${other.recordSql('r')} AS r, ${match.sql} AS k, row_number() OVER (PARTITION BY ${match.sql} ORDER BY ${order}) AS rn FROM ${from} WHERE ${match.sql} IN (${list}) AND (${readable.sql})`;
      const sql = rel.kind === 'forward' ? `SELECT q.r, q.k FROM (${ranked}) q WHERE q.rn = 1` : `SELECT q.r, q.k FROM (${ranked}) q WHERE q.rn <= ${POPULATE_LIMIT} ORDER BY q.rn`;
      for (const x of await rows<{ r: RecordRow; k: unknown }>(em, sql, params)) {
        const k = keyOf(x.k)!;
        const bucket = found.get(k) ?? [];
        bucket.push(plain(other, x.r));
        found.set(k, bucket);
      }
    }
    for (const r of records) {
      const k = keyOf(r[rel.local]);
      const hit = k === undefined ? undefined : found.get(k);
      r[rel.name] = rel.kind === 'forward' ? (hit?.[0] ?? null) : (hit ?? []);
    }
  }
}

// --- aggregates ------------------------------------------------------------------------------

const AGGREGATE = /^(count|count_distinct|sum|avg|min|max)(?:\((\*|[A-Za-z_][A-Za-z0-9_.]*)\))?$/;
const NUMERIC = new Set(['bigint', 'integer', 'double precision']);
const ORDERED = new Set(['text', 'uuid', 'bigint', 'integer', 'double precision', 'date', 'time', 'timestamptz', 'interval']);

/**
 * `_aggregate=count,sum(price),count_distinct(company_id)` with optional `_group_by=a,b`:
 * one row per group of {group fields…, count, sum_price, count_distinct_company_id}, under the
 * same conditions as the list, groups in pages ordered by `_sort` (group fields or aggregate
 * names) then by the group fields.
 */
export async function aggregate(em: EntityManager, t: Target, query: Record<string, unknown>): Promise<RecordPage> {
  if (typeof query._aggregate !== 'string' || query._aggregate === '') throw fieldError('_aggregate', 'Expected a comma list such as count,sum(price).');
  if (query.populate !== undefined) throw fieldError('populate', 'populate does not apply to aggregates.');
  const where = await whereOf(em, t, query);
  const fields = resolver(t);
  const outputs: [string, string][] = [];
  const groups: [string, string][] = [];
  if (query._group_by !== undefined) {
    if (typeof query._group_by !== 'string' || query._group_by === '') throw fieldError('_group_by', 'Expected a comma list of fields.');
    for (const name of new Set(query._group_by.split(','))) {
      const info = fields.get(name);
      if (!info || info.wrap) throw fieldError('_group_by', `Unknown field "${name}" (group by the table's own fields).`);
      groups.push([name, info.sql!]);
      outputs.push([name, info.sql!]);
    }
  }
  /** Outputs that are sums or averages of floating-point fields (written without binary noise, below). */
  const floats = new Set<number>();
  /** An aggregate's output; its name must not be a group field's (a field may be named `count`). */
  const output = (name: string, sql: string) => {
    if (outputs.some(([n]) => n === name)) throw fieldError('_aggregate', `The output "${name}" would also be the group field "${name}": group by another field or aggregate another way.`);
    outputs.push([name, sql]);
  };
  for (const item of new Set(query._aggregate.split(','))) {
    const m = AGGREGATE.exec(item.trim());
    if (!m) throw fieldError('_aggregate', `Unknown aggregate "${item}" (count, count_distinct(f), sum(f), avg(f), min(f), max(f)).`);
    const [, fn, arg] = m as unknown as [string, string, string | undefined];
    if (fn === 'count' && (arg === undefined || arg === '*')) {
      output('count', 'count(*)');
      continue;
    }
    if (arg === undefined || arg === '*') throw fieldError('_aggregate', `"${fn}" needs a field: ${fn}(field).`);
    const info = fields.get(arg);
    if (!info || info.wrap) throw fieldError('_aggregate', `Unknown field "${arg}".`);
    const use = (fn === 'sum' || fn === 'avg') && info.numeric ? info.numeric : info;
    if ((fn === 'sum' || fn === 'avg') && !NUMERIC.has(use.pgType) && use.pgType !== 'interval') throw fieldError('_aggregate', `"${fn}" needs a numeric field ("${arg}" is ${use.pgType}).`);
    if ((fn === 'min' || fn === 'max') && !ORDERED.has(use.pgType)) throw fieldError('_aggregate', `"${fn}" does not apply to "${arg}" (${use.pgType}).`);
    const sql = fn === 'count_distinct' ? `count(DISTINCT ${use.sql})` : `${fn}(${use.sql})`;
    if ((fn === 'sum' || fn === 'avg') && use.pgType === 'double precision') floats.add(outputs.length);
    output(`${fn}_${arg.replace(/\./g, '_')}`, sql);
  }
  const names = new Map(outputs.map(([n], i) => [n, i]));
  const order: string[] = [];
  if (query._sort !== undefined && query._sort !== '') {
    if (typeof query._sort !== 'string') throw fieldError('_sort', 'Expected a comma-separated list.');
    for (const part of query._sort.split(',')) {
      const desc = part.startsWith('-');
      const pos = names.get(desc ? part.slice(1) : part);
      if (pos === undefined) throw fieldError('_sort', `"${part}" is not an output of this aggregate (${[...names.keys()].join(', ')}).`);
      order.push(`c${pos} ${desc ? 'DESC' : 'ASC'}`);
    }
  }
  groups.forEach((_, i) => order.push(`c${i} ASC`));
  const p = pageOf(query);
  const groupBy = groups.length ? ` GROUP BY ${groups.map((_, i) => i + 1).join(', ')}` : '';
  const inner = `SELECT ${outputs.map(([, sql], i) => `${sql} AS c${i}`).join(', ')} FROM ${t.table} t WHERE ${where.sql}${groupBy}`;
  const total = groups.length ? await countOf(em, `SELECT count(*) AS n FROM (${inner}) g`, where.params) : 1;
  // A sum of decimal values in floating point carries binary noise (12350139.470000004): it is
  // written with 15 significant digits, as PostgreSQL converts a double to numeric (12350139.47);
  // infinities and NaN as they are.
  const value = (i: number) => (floats.has(i) ? `CASE WHEN g.c${i} IN ('Infinity', '-Infinity', 'NaN') THEN to_jsonb(g.c${i}) ELSE to_jsonb(g.c${i}::numeric) END` : `g.c${i}`);
  const object = `jsonb_build_object(${outputs.map(([n], i) => `${quoteName(n)}, ${value(i)}`).join(', ')})`;
  const sorted = order.length ? ` ORDER BY ${order.join(', ')}` : '';
  const data = (await rows<{ r: RecordRow }>(em, `SELECT ${object} AS r FROM (${inner}) g${sorted} LIMIT ? OFFSET ?`, [...where.params, p.limit, p.offset])).map((x) => x.r);
  return { data, total, page: p.page, page_size: p.pageSize };
}

/** An output name as a SQL string literal (names are field names or fn_field: word characters and dots only). */
function quoteName(n: string): string {
  if (!/^[A-Za-z0-9_.]+$/.test(n)) throw fieldError('_aggregate', `Invalid output name "${n}".`);
  return `'${n}'`;
}
