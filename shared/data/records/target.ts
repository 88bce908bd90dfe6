// What the records API works on (docs/data-tables.md "Records API"): a materialized table of
// one of the three providers, seen as record fields over SQL expressions. flat_table fields
// are columns; jsonb fields live in `data`, docstore documents in `doc` (dotted paths reach
// into them). Every expression is built from the stored schema's validated names only.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ServiceContext } from '../../context.ts';
import { DomainError, permissionDenied, fieldError } from '../../errors.ts';
import { quoteIdent, rows } from '../../db/sql.ts';
import { quotedSchema } from '../../tenancy/schema.ts';
import type { Action } from '../../auth/actor.ts';
import { siteSchemaFor } from '../../tenancy/site-access.ts';
import { findTable, type TableRow, type TableScope } from '../datatable.queries.ts';
import { columnType, quoteLiteral, type ProviderType } from '../ddl.ts';
import type { ColumnInfo, Columns, SqlFragment } from '../query/filter.ts';
import { NO_ROWS, rowsAllowed, tableKind, withinAllowed, type PolicyTarget } from './access.ts';
import { GENERATED_KEY, declaredKey, foreignKeysOf, primaryKeyOf, type TableSchema } from '../table-schema.ts';

export type RecordRow = Record<string, unknown>;

/** One materialized table as the records API sees it. */
export interface TableView {
  name: string;
  provider: ProviderType;
  /** `"schema"."physical"`. */
  table: string;
  schema: TableSchema;
  hash: string;
  pk: string[];
  /** The fields (and the generated key) over alias `t`. */
  columns: Map<string, ColumnInfo>;
  /** The fields over another alias (related tables in sub-queries). */
  columnsAs(alias: string): Map<string, ColumnInfo>;
  /** The SQL expression of a whole record (jsonb) over an alias. */
  recordSql(alias: string): string;
  /**
   * The record over alias `t` as compact JSON text (as JSON.stringify writes it; the value of an
   * object or array field as PostgreSQL writes jsonb, `{"a": 1}`), written by PostgreSQL exactly
   * as plain() shows a record (fields in schema order, timestamps in UTC with milliseconds,
   * infinite numbers as INF/-INF): flat tables of at most 50 fields and no duration; else undefined.
   */
  jsonSql?: string;
}

/** A table addressed by a request, with the site schema it lives in and the app's tables on demand. */
export interface Target extends TableView, Omit<PolicyTarget, 'columns' | 'pk'> {
  site: string;
  row: TableRow;
  /** Relations to other tables of the app (loaded once per request when a path or populate needs them). */
  relations?: Map<string, Relation>;
  /** The rows the actor may read, over alias `t` (access.ts): read queries AND it into their WHERE. */
  readable: SqlFragment;
  /** The rows of another table of the app the actor may read, over an alias (relations). */
  readableOf(v: TableView, alias: string): Promise<SqlFragment>;
  /** SQL compiled for this table, by purpose (kept with the cached definition). */
  statements: Map<string, string>;
}

export interface Relation {
  name: string;
  kind: 'forward' | 'reverse' | 'many';
  other: TableView;
  /** forward: the local FK field and the other table's key; reverse: the other table's FK field to our key. */
  local: string;
  remote: string;
  /** many-to-many: the junction table, its field toward us and its field toward `other`. */
  junction?: { view: TableView; toUs: string; toOther: string };
  /**
   * The related rows the actor may read: `other`'s read plan over alias `r`, and for a
   * many-to-many the junction's over `j` too (set by loadRelations). A condition, sort or
   * populate that follows the relation sees only these rows.
   */
  readable?: SqlFragment;
}

const DOC_PATH_SEGMENT = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const MAX_PATH = 8;

/** Record fields of a provider over an alias. */
function columnsFor(provider: ProviderType, schema: TableSchema, alias: string): Map<string, ColumnInfo> {
  const out = new Map<string, ColumnInfo>();
  const a = (name: string) => `${alias}.${quoteIdent(name)}`;
  const key = declaredKey(schema);
  if (provider === 'flat_table') {
    if (!key) out.set(GENERATED_KEY, { column: GENERATED_KEY, pgType: 'uuid', sql: a(GENERATED_KEY) });
    for (const f of schema.fields) out.set(f.name, { column: f.name, pgType: columnType(f), sql: a(f.name) });
    return out;
  }
  const body = a(provider === 'jsonb' ? 'data' : 'doc');
  if (provider === 'docstore' || !key) out.set(GENERATED_KEY, { column: GENERATED_KEY, pgType: 'uuid', sql: a('id') });
  for (const f of schema.fields) {
    const pgType = columnType(f);
    const lit = quoteLiteral(f.name);
    const sql = provider === 'jsonb' && key?.length === 1 && key[0] === f.name
      ? a('id')
      : pgType === 'jsonb' ? `(${body} -> ${lit})` : pgType === 'text' ? `(${body} ->> ${lit})` : `((${body} ->> ${lit})::${pgType})`;
    out.set(f.name, { column: f.name, pgType, sql });
  }
  return out;
}

function tableView(name: string, provider: ProviderType, site: string, physical: string, schema: TableSchema, hash: string): TableView {
  const memo = new Map<string, Map<string, ColumnInfo>>();
  const columnsAs = (alias: string) => {
    let m = memo.get(alias);
    if (!m) memo.set(alias, (m = columnsFor(provider, schema, alias)));
    return m;
  };
  const pk = provider === 'docstore' ? [GENERATED_KEY] : primaryKeyOf(schema);
  const columns = columnsAs('t');
  return {
    name,
    provider,
    table: `${quotedSchema(site)}.${quoteIdent(physical)}`,
    schema,
    hash,
    pk,
    columns,
    columnsAs,
    jsonSql: provider === 'flat_table' ? jsonRecordSql(columns) : undefined,
    recordSql(alias) {
      // `alias.*`, never the bare alias: a field may be named like the alias (`to_jsonb(t)` would read column t).
      if (provider === 'flat_table') return `to_jsonb(${alias}.*)`;
      if (provider === 'docstore') return `(${alias}."doc" || jsonb_build_object('id', ${alias}."id"))`;
      return declaredKey(schema) ? `${alias}."data"` : `(jsonb_build_object('id', ${alias}."id") || ${alias}."data")`;
    },
  };
}

const MAX_JSON_FIELDS = 50;
const JS_ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/** See TableView.jsonSql: `'{"a":' || <a as JSON> || ',"b":' || … || '}'` (json_build_object would write `{"a" : 1, …}`). */
function jsonRecordSql(columns: Map<string, ColumnInfo>): string | undefined {
  if (columns.size > MAX_JSON_FIELDS) return undefined;
  const parts: string[] = [];
  for (const [name, { pgType, sql }] of columns) {
    if (pgType === 'interval') return undefined; // XSD durations are written by field-types.ts
    // A type whose text is its JSON (integers, booleans, jsonb) or needs only quotes (a uuid, the
    // timestamp's fixed form) is written without to_json, which looks up how to write the type on
    // every value (the bench's row of 7 fields: 4.6 → 3.6 µs); text, floats, dates and times go through it.
    const value =
      pgType === 'timestamptz' ? `'"' || to_char(${sql} AT TIME ZONE 'UTC', ${JS_ISO}) || '"'`
      : pgType === 'double precision' ? `CASE ${sql} WHEN 'Infinity' THEN '"INF"' WHEN '-Infinity' THEN '"-INF"' ELSE to_json(${sql})::text END`
      : pgType === 'bigint' || pgType === 'integer' || pgType === 'boolean' || pgType === 'jsonb' ? `(${sql})::text`
      : pgType === 'uuid' ? `'"' || (${sql})::text || '"'`
      : `to_json(${sql})::text`;
    parts.push(`${quoteLiteral(`${parts.length ? ',' : ''}${JSON.stringify(name)}:`)} || coalesce(${value}, 'null')`);
  }
  return parts.length ? `('{' || ${parts.join(' || ')} || '}')` : `'{}'`;
}

/**
 * A table's definition as the records API uses it: kept per process (common/request-caches.ts)
 * until a change to the site's apps, data sources or tables. `view` is absent for a table not
 * materialized; `statements` memoizes SQL compiled for it (by purpose).
 */
export interface CachedTable {
  row: TableRow;
  view?: TableView;
  statements: Map<string, string>;
}

/** The table (404s as findTable's: an unknown app, data source or table); through the cache when the request has one. */
async function cachedTable(ctx: ServiceContext, site: string, scope: TableScope, name: string): Promise<CachedTable> {
  const load = async (): Promise<CachedTable | DomainError> => {
    try {
      const row = await findTable(ctx.em, site, scope, name);
      const view = row.is_materialized
        ? tableView(row.name, row.provider_type, site, row.src_physical ?? row.physical_table_name, row.json_schema, row.schema_hash.trim())
        : undefined;
      return { row, view, statements: new Map() };
    } catch (err) {
      if (err instanceof DomainError && err.status === 404) return err; // kept too: a miss costs no query either
      throw err;
    }
  };
  const found = ctx.caches ? await ctx.caches.tables.get(`${site}|${scope.app_slug}|${scope.ds ?? ''}|${name}`, load) : await load();
  if (found instanceof DomainError) throw found;
  return found;
}

/**
 * The table a records call works on: the check that the actor may act on records of this site at
 * all (403 before 404: another site's users learn nothing), the table (404; 400 when not
 * materialized), the rows the actor may read under the app's policies, and a 403 at once for an
 * action the policies allow on no row.
 */
export async function openTarget(ctx: ServiceContext, scope: TableScope, name: string, ...actions: [Action, ...Action[]]): Promise<Target> {
  let site = '';
  for (const action of actions) site = await siteSchemaFor(ctx, action, 'Record');
  const { row, view, statements } = await cachedTable(ctx, site, scope, name);
  if (!view) {
    throw new DomainError(
      'BAD_REQUEST',
      `Data table "${name}" is not materialized: it has no records until it is (\`platform table materialize ${name} --app ${row.app_slug} --site ${site}\`, or POST /api/apps/${row.app_slug}/datatables/${name}/materialize/).`,
    );
  }
  const policy = { site, app: { id: row.app_id, slug: row.app_slug }, kind: tableKind(row.name), columns: view.columns, pk: view.pk };
  for (const action of actions) if (action !== 'read' && (await rowsAllowed(ctx, policy, action)) === NO_ROWS) throw permissionDenied();
  const readableOf = (v: TableView, alias: string) =>
    rowsAllowed(ctx, { site, app: policy.app, kind: tableKind(v.name), columns: v.columnsAs(alias), pk: v.pk }, 'read');
  return { ...view, ...policy, row, statements, readable: await rowsAllowed(ctx, policy, 'read'), readableOf };
}

/** A document path (`address.city`) of a docstore table: text, read as a number for ordered comparisons. */
function docPath(t: TableView, path: string, alias = 't'): ColumnInfo | undefined {
  const segments = path.split('.');
  if (segments.length > MAX_PATH || !segments.every((s) => DOC_PATH_SEGMENT.test(s))) return undefined;
  const lit = quoteLiteral(`{${segments.join(',')}}`);
  const doc = `${alias}."doc"`;
  return {
    column: path,
    pgType: 'text',
    sql: `(${doc} #>> ${lit})`,
    numeric: { column: path, pgType: 'double precision', sql: `(CASE WHEN jsonb_typeof(${doc} #> ${lit}) = 'number' THEN (${doc} #>> ${lit})::double precision END)` },
  };
}

/** The app's materialized tables (this one as `t` itself), keyed by name. */
export async function appTables(em: EntityManager, t: Target): Promise<Map<string, TableView>> {
  const found = await rows<{ name: string; provider_type: ProviderType; physical: string; json_schema: TableSchema; schema_hash: string }>(
    em,
    `SELECT t.name, d.provider_type, coalesce(s.physical_table_name, t.physical_table_name) AS physical, t.json_schema, t.schema_hash
       FROM ${quotedSchema(t.site)}.data_tables t
       JOIN ${quotedSchema(t.site)}.data_sources d ON d.id = t.data_source_id
       LEFT JOIN ${quotedSchema(t.site)}.data_tables s ON s.id = t.source_table_id
      WHERE t.app_id = ? AND t.is_materialized AND t.is_active`,
    [t.row.app_id],
  );
  return new Map(found.map((r) => [r.name, r.name === t.name ? t : tableView(r.name, r.provider_type, t.site, r.physical, r.json_schema, r.schema_hash.trim())]));
}

/** Single-field foreign keys of a table: [local field, referenced table name, referenced field]. */
function singleKeys(v: TableView): [string, string, string][] {
  return foreignKeysOf(v.schema)
    .filter((fk) => fk.fields.length === 1)
    .map((fk) => [fk.fields[0]!, fk.reference.resource === '' ? v.name : fk.reference.resource, fk.reference.fields[0]!]);
}

/**
 * The relations of a table: each single-field foreign key (named by its field), each reverse
 * foreign key of another table (named by that table, `{table}_by_{field}` when it has several),
 * and each many-to-many through a junction table holding foreign keys to both (named by the
 * far table, `{far}_via_{junction}` when that name is taken).
 */
export async function loadRelations(em: EntityManager, t: Target): Promise<Map<string, Relation>> {
  if (t.relations) return t.relations;
  const tables = await appTables(em, t);
  const out = new Map<string, Relation>();
  const add = (r: Relation) => {
    if (!out.has(r.name) && !t.columns.has(r.name)) out.set(r.name, r);
  };
  for (const [field, target, remote] of singleKeys(t)) {
    const other = tables.get(target);
    if (other) out.set(field, { name: field, kind: 'forward', other, local: field, remote });
  }
  for (const other of tables.values()) {
    const keys = singleKeys(other);
    const toUs = keys.filter(([, target]) => target === t.name);
    for (const [field, , remote] of toUs) {
      add({ name: toUs.length > 1 ? `${other.name}_by_${field}` : other.name, kind: 'reverse', other, local: remote, remote: field });
    }
    if (toUs.length !== 1 || other === t) continue;
    const [usField, , usKey] = toUs[0]!;
    for (const [farField, farName, farKey] of keys) {
      const far = tables.get(farName);
      if (farField === usField || !far) continue;
      const rel: Relation = { name: far.name, kind: 'many', other: far, local: usKey, remote: farKey, junction: { view: other, toUs: usField, toOther: farField } };
      add(out.has(far.name) || t.columns.has(far.name) ? { ...rel, name: `${far.name}_via_${other.name}` } : rel);
    }
  }
  for (const rel of out.values()) {
    const other = await t.readableOf(rel.other, 'r');
    rel.readable = rel.junction ? withinAllowed(await t.readableOf(rel.junction.view, 'j'), other) : other;
  }
  t.relations = out;
  return out;
}

/** The SQL expression of a field of a table over an alias. */
export const fieldSql = (v: TableView, alias: string, field: string): string => v.columnsAs(alias).get(field)!.sql!;

/** `EXISTS (…)` over the related rows (alias `r`) of the row in alias `t` that the actor may read. */
function relatedExists(t: Target, rel: Relation, condition: string): SqlFragment {
  const r = rel.other;
  const { sql: readable, params } = rel.readable!;
  if (rel.kind !== 'many') return { sql: `EXISTS (SELECT 1 FROM ${r.table} r WHERE ${fieldSql(r, 'r', rel.remote)} = ${fieldSql(t, 't', rel.local)} AND ${condition} AND (${readable}))`, params };
  const j = rel.junction!;
  return {
    sql: `EXISTS (SELECT 1 FROM ${j.view.table} j JOIN ${r.table} r ON ${fieldSql(r, 'r', rel.remote)} = ${fieldSql(j.view, 'j', j.toOther)} WHERE ${fieldSql(j.view, 'j', j.toUs)} = ${fieldSql(t, 't', rel.local)} AND ${condition} AND (${readable}))`,
    params,
  };
}

/** A name or path: an own field, `relation.field` (with its relation) or a docstore document path. */
function resolve(t: Target, path: string): { info: ColumnInfo; rel?: Relation } | undefined {
  const own = t.columns.get(path);
  if (own) return { info: own };
  const dot = path.indexOf('.');
  const rel = dot > 0 ? t.relations?.get(path.slice(0, dot)) : undefined;
  if (rel) {
    const info = rel.other.columnsAs('r').get(path.slice(dot + 1));
    return info && { info, rel };
  }
  const doc = t.provider === 'docstore' ? docPath(t, path) : undefined;
  return doc && { info: doc };
}

/**
 * Fields by name or path for conditions (resolve; a relation's field carries its EXISTS).
 * Relations must be loaded first (needsRelations).
 */
export function resolver(t: Target): Columns {
  return {
    get(path: string) {
      const found = resolve(t, path);
      const rel = found?.rel;
      return rel ? { ...found.info, wrap: (c: string) => relatedExists(t, rel, c) } : found?.info;
    },
  };
}

/** Whether a query names a path or a population (then the app's tables are loaded). */
export function needsRelations(query: Record<string, unknown>): boolean {
  if (query.populate !== undefined) return true;
  return Object.entries(query).some(([k, v]) => k.includes('.') || (k === '_sort' && typeof v === 'string' && v.includes('.')));
}

/** A sort key: an own field or document path, or a forward relation's field (a scalar sub-query). */
export function sortExpression(t: Target, path: string): string {
  const found = resolve(t, path);
  if (!found) throw fieldError('_sort', `Unknown field "${path}".`);
  const { info, rel } = found;
  if (!rel) return info.sql!;
  if (rel.kind !== 'forward') throw fieldError('_sort', `"${path}": sorting follows foreign keys only (not reverse or many-to-many relations).`);
  // The order would tell the values of records the actor may not read: only a plan without
  // values (all rows, none, or a condition on the records alone) goes into the ORDER BY.
  const readable = rel.readable!;
  if (readable.params.length) throw fieldError('_sort', `"${path}": the policies of table "${rel.other.name}" let you read only some of its records; sort by its fields is not available.`);
  return `(SELECT ${info.sql} FROM ${rel.other.table} r WHERE ${fieldSql(rel.other, 'r', rel.remote)} = ${fieldSql(t, 't', rel.local)} AND (${readable.sql}))`;
}
