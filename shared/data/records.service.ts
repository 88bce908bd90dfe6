// Records of materialized data tables of every provider (spec Part 2 §4 "Data records"): list
// with conditions (own fields, foreign keys, reverse foreign keys, many-to-many, document
// paths), keyword search, sort, pages, populate and aggregates; get; create one or many (all
// or nothing, set-based); upsert; patch one or many; delete by key, by ids or by filter.
// Plain SQL with bound parameters; identifiers only from the stored schema, quoted. Decided by
// the app's policies on the table's kind (records/access.ts): lists see the rows the read plan
// admits; a record the caller may not read, change or delete is a 403; bulk writes are all or
// nothing. docs/data-tables.md "Records API", docs/policies.md.
import type { EntityManager } from '@mikro-orm/postgresql';
import { actorItem, writeTransaction } from '../realtime/actor.ts';
import { readsOf, type ServiceContext } from '../context.ts';
import { DomainError, fieldError, permissionDenied, validationError, type FieldErrors } from '../errors.ts';
import { preparedRows, quoteIdent, rows } from '../db/sql.ts';
import type { TableScope } from './datatable.service.ts';
import { parseQueryFilters, type Filter, type SqlFragment } from './query/filter.ts';
import { aggregate, compileOn, listQuery, pageOf, plain, plannedCount, populate, selectRecords } from './records/read.ts';
import { JsonText } from '../common/json-text.ts';
import { pacer } from '../common/pace.ts';
import { ALL_ROWS, requireAllowed, rowsAllowed, withinAllowed } from './records/access.ts';
import { loadRelations, openTarget, resolver, type RecordRow, type Target } from './records/target.ts';
import { batchOf, failingRecord, guarded, insertRecords, keyFilter, recordErrors, recordNotFound, updateRecord, violation } from './records/write.ts';
import type { RecordPage } from './records.schemas.ts';
import { HierarchyBody, hierarchyOfList, hierarchyOfRecord, hierarchyRequest, type GraphSettings } from './graph/hierarchy.ts';

export type { RecordRow } from './records/target.ts';

/** Records per bulk create (one set-based statement per request). */
export const MAX_BULK_CREATE = 10_000;
/** Records per bulk patch (each one read, merged and validated). */
export const MAX_BULK_PATCH = 1000;
const FORMATS = new Set(['json', 'flat']);

function checkFormat(query: Record<string, unknown>): void {
  const f = query.format;
  if (f === undefined || (typeof f === 'string' && FORMATS.has(f))) return;
  if (f === 'tree' || f === 'graph' || f === 'include') throw fieldError('format', `format=${f} applies to tables with hierarchy: true (and graph.enabled) only.`);
  throw fieldError('format', 'Expected json, flat or csv.');
}

/** The condition selecting the record with this key; undefined for a key of the wrong form. */
function keyCondition(t: Target, id: string | unknown[]): SqlFragment | undefined {
  const cond = keyFilter(t, id);
  return cond && compileOn(t, cond);
}

/**
 * The record with this key, the condition that selects it, and whether the actor may `allowed`'s
 * action on it (selected beside the row: one statement); undefined when there is none, or when
 * the actor may not read it (what a caller may not read is missing to them, spec Part 2 §7).
 */
async function findOne(em: EntityManager, t: Target, id: string | unknown[], allowed: SqlFragment, lock = false): Promise<{ row: RecordRow; where: SqlFragment; ok: boolean } | undefined> {
  const where = keyCondition(t, id);
  if (!where) return undefined;
  const visible = withinAllowed(t.readable, where);
  const [found] = await preparedRows<{ r: RecordRow; ok: boolean }>(
    em,
    `SELECT ${t.recordSql('t')} AS r, (${allowed.sql}) AS ok FROM ${t.table} t WHERE ${visible.sql}${lock ? ' FOR UPDATE' : ''}`,
    [...allowed.params, ...visible.params],
  );
  return found && { row: plain(t, found.r), where, ok: found.ok };
}

/** A patch applied to the record in `em`'s transaction: validated merged, errors keyed with `prefix`. */
async function patchOne(em: EntityManager, t: Target, updatable: SqlFragment, key: string | unknown[], patch: unknown, prefix: string, errors: FieldErrors): Promise<RecordRow | undefined> {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
    errors[prefix ? prefix.slice(0, -1) : 'non_field_errors'] = ['Expected an object of field values.'];
    return undefined;
  }
  const found = await findOne(em, t, key, updatable, true);
  if (!found) {
    if (!prefix) throw recordNotFound();
    errors[`${prefix}${t.pk.join(',')}`] = ['Record not found.'];
    return undefined;
  }
  if (!found.ok) throw permissionDenied(); // in the caller's transaction: a bulk patch changes nothing
  const rec = patch as RecordRow;
  const merged = { ...found.row, ...rec };
  if (!recordErrors(t, merged, prefix, errors, rec)) return undefined;
  if (!Object.keys(rec).length) return found.row;
  return guarded(t, async () => (await updateRecord(em, t, found.where, rec, merged)) ?? found.row, prefix);
}

/**
 * How a list counts its matches (`_count` or `Prefer: count=`, PostgREST's model): `exact` (the
 * default, the spec's envelope), `planned` (the planner's estimate, no scan) or `none` (total null).
 */
export type CountMode = 'exact' | 'planned' | 'none';
export const COUNT_MODES: readonly CountMode[] = ['exact', 'planned', 'none'];

/**
 * A page of records. `data` is JSON text written by PostgreSQL (TableView.jsonSql) when the
 * table allows and nothing is populated; otherwise records.
 */
export async function listRecords(ctx: ServiceContext, scope: TableScope, name: string, query: Record<string, unknown>, count: CountMode = 'exact', graph?: GraphSettings): Promise<RecordPage | RecordTextPage | HierarchyBody> {
  const t = await openTarget(ctx, scope, name, 'read');
  const hierarchy = graph && hierarchyRequest(t, query, graph);
  if (hierarchy) return new HierarchyBody(await hierarchyOfList(ctx, hierarchy.g, hierarchy.h, query));
  checkFormat(query);
  if (query._aggregate !== undefined) return guarded(t, () => aggregate(ctx.em, t, query));
  if (query._group_by !== undefined) throw fieldError('_group_by', '_group_by needs _aggregate.');
  const em = readsOf(ctx);
  const { where, orderBy } = await listQuery(em, t, query);
  const p = pageOf(query);
  const json = query.populate === undefined ? t.jsonSql : undefined;
  const page = `SELECT ${json ?? t.recordSql('t')} AS r FROM ${t.table} t WHERE ${where.sql} ORDER BY ${orderBy} LIMIT ? OFFSET ?`;
  const pageParams = [...where.params, p.limit, p.offset];
  type Found = { n?: string; r: RecordRow | string | null };
  const [total, found] = await guarded(t, async (): Promise<[number | null, Found[]]> => {
    if (count === 'exact') {
      // One statement, one round trip: the count, and the page beside it (one row per record; one
      // row with r null when the page is empty).
      const both = await preparedRows<Found>(
        em,
        `SELECT c.n, p.r FROM (SELECT count(*) AS n FROM ${t.table} t WHERE ${where.sql}) c LEFT JOIN LATERAL (${page}) p ON true`,
        [...where.params, ...pageParams],
      );
      return [Number(both[0]?.n ?? 0), both.filter((x) => x.r !== null)];
    }
    const records = preparedRows<Found>(em, page, pageParams);
    return Promise.all([count === 'planned' ? plannedCount(em, `SELECT 1 FROM ${t.table} t WHERE ${where.sql}`, where.params) : null, records]);
  });
  const envelope = { total, page: p.page, page_size: p.pageSize };
  if (json) return { data: new JsonText(`[${found.map((x) => x.r).join(',')}]`), ...envelope };
  const data = found.map((x) => plain(t, x.r as RecordRow));
  if (query.populate !== undefined && data.length) await populate(ctx, t, data, query.populate);
  return { data, ...envelope };
}

/** A page whose records are PostgreSQL's JSON text. */
export type RecordTextPage = Omit<RecordPage, 'data'> & { data: JsonText };

/** One record: JSON text written by PostgreSQL when the table allows and nothing is populated (as listRecords), else the record. */
export async function getRecord(ctx: ServiceContext, scope: TableScope, name: string, id: string, query: Record<string, unknown> = {}, graph?: GraphSettings): Promise<RecordRow | JsonText | HierarchyBody> {
  const t = await openTarget(ctx, scope, name, 'read');
  const hierarchy = graph && hierarchyRequest(t, query, graph);
  if (hierarchy) return new HierarchyBody(await hierarchyOfRecord(ctx, hierarchy.g, hierarchy.h, id, graph));
  checkFormat(query);
  if (query.populate === undefined && t.jsonSql) {
    const where = keyCondition(t, id);
    const visible = where && withinAllowed(t.readable, where);
    const [found] = visible ? await preparedRows<{ r: string }>(readsOf(ctx), `SELECT ${t.jsonSql} AS r FROM ${t.table} t WHERE ${visible.sql}`, visible.params) : [];
    if (!found) throw recordNotFound();
    return new JsonText(found.r);
  }
  const found = await findOne(readsOf(ctx), t, id, ALL_ROWS);
  if (!found) throw recordNotFound();
  if (query.populate !== undefined) await populate(ctx, t, [found.row], query.populate);
  return found.row;
}

/** One record (an object) or many (an array, all or nothing, at most MAX_BULK_CREATE); as PostgreSQL's JSON text where the table allows (listRecords). */
export async function createRecords(ctx: ServiceContext, scope: TableScope, name: string, body: unknown): Promise<RecordRow | RecordRow[] | JsonText> {
  const t = await openTarget(ctx, scope, name, 'create');
  const many = Array.isArray(body);
  const records = many ? batchOf(body, MAX_BULK_CREATE) : [body];
  const errors: FieldErrors = {};
  const valid: (RecordRow | undefined)[] = [];
  const pace = pacer(); // 10,000 records take tens of milliseconds to check: others are served in between
  for (const [i, r] of records.entries()) {
    valid.push(recordErrors(t, r, many ? `${i}.` : '', errors));
    await pace();
  }
  if (Object.keys(errors).length) throw validationError(errors, many ? 'Invalid records: nothing was stored.' : 'Invalid record.');
  const ok = valid as RecordRow[];
  await requireAllowed(ctx, t, 'create', ok);
  try {
    // One record is one statement (atomic by itself, one round trip); several may be several (one per set of fields given): one transaction.
    const created = many ? await writeTransaction(ctx, (tx) => insertRecords(tx, t, ok, 'json')) : await insertRecords(readsOf(ctx), t, ok, 'json', actorItem(ctx));
    if (typeof created[0] === 'string') return new JsonText(many ? `[${created.join(',')}]` : created[0]);
    return many ? (created as RecordRow[]) : (created[0] as RecordRow);
  } catch (err) {
    const error = violation(t, err);
    if (!error || !many) throw error ?? err;
    const found = await failingRecord(ctx.em, t, ok);
    throw (found && violation(t, found.error, `${found.index}.`)) ?? error;
  }
}

/** `upsert/?unique_fields=a,b`: updates the record with these values, else inserts it. */
export async function upsertRecord(ctx: ServiceContext, scope: TableScope, name: string, body: unknown, query: Record<string, unknown>): Promise<{ data: RecordRow; created: boolean }> {
  const t = await openTarget(ctx, scope, name, 'create', 'update');
  if (typeof query.unique_fields !== 'string' || query.unique_fields === '') throw fieldError('unique_fields', 'Name the fields that identify the record: unique_fields=a,b.');
  const fields = [...new Set(query.unique_fields.split(','))];
  const columns = resolver(t);
  for (const f of fields) if (!columns.get(f) || columns.get(f)!.wrap) throw fieldError('unique_fields', `Unknown field "${f}".`);
  const errors: FieldErrors = {};
  const rec = recordErrors(t, body, '', errors);
  if (!rec) throw validationError(errors, 'Invalid record.');
  for (const f of fields) if (rec[f] === undefined || rec[f] === null) errors[f] = ['A value is required: it identifies the record.'];
  if (Object.keys(errors).length) throw validationError(errors, 'Invalid record.');
  return writeTransaction(ctx, async (em) => {
    const where = compileOn(t, { op: 'and', args: fields.map((field) => ({ op: 'eq' as const, field, value: rec[field] })) });
    // One writer per identifying value set: two racing upserts of one record cannot both insert.
    await rows(em, 'SELECT pg_advisory_xact_lock(hashtext(?))', [`${t.table}:${JSON.stringify(fields.map((f) => rec[f]))}`]);
    const [current, second] = await selectRecords(em, t, `SELECT ${t.recordSql('t')} AS r FROM ${t.table} t WHERE ${where.sql} LIMIT 2 FOR UPDATE`, where.params);
    if (second) throw new DomainError('CONFLICT', 'Several records have these values: unique_fields must identify one record.', { errors: { unique_fields: ['Several records have these values.'] } });
    await requireAllowed(ctx, t, current ? 'update' : 'create', [current ?? rec]);
    if (!current) return { data: (await guarded(t, () => insertRecords(em, t, [rec])))[0]!, created: true };
    const data = await guarded(t, async () => (await updateRecord(em, t, where, rec, { ...current, ...rec })) ?? current);
    return { data, created: false };
  });
}

/** A partial update, validated as the whole record it produces. */
export async function patchRecord(ctx: ServiceContext, scope: TableScope, name: string, id: string, body: unknown): Promise<RecordRow | JsonText> {
  const t = await openTarget(ctx, scope, name, 'update');
  const updatable = await rowsAllowed(ctx, t, 'update');
  if (t.provider === 'flat_table' && t.jsonSql && typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length) {
    return patchInPlace(ctx, t, updatable, id, body as RecordRow);
  }
  return writeTransaction(ctx, async (tx) => {
    const errors: FieldErrors = {};
    const row = await patchOne(tx, t, updatable, id, body, '', errors);
    if (!row) throw validationError(errors, 'Invalid record.');
    return row;
  });
}

/**
 * A flat table's record patched by one statement (issue 33): the patch validated in process (a
 * flat table's checks are per field, and only the patched fields can be at fault: recordErrors),
 * then `UPDATE … WHERE <key, readable and updatable: the caller's policy conditions on the old
 * values> RETURNING` the answer's JSON, named, outside any transaction. Nothing updated: a
 * record the caller reads but may not update is a 403, else a 404 (a second statement, on that
 * path only).
 */
async function patchInPlace(ctx: ServiceContext, t: Target, updatable: SqlFragment, id: string, rec: RecordRow): Promise<JsonText> {
  const errors: FieldErrors = {};
  if (!recordErrors(t, { ...rec }, '', errors, rec)) throw validationError(errors, 'Invalid record.');
  const where = keyCondition(t, id);
  if (!where) throw recordNotFound();
  const visible = withinAllowed(t.readable, where);
  const target = withinAllowed(updatable, visible);
  const set = Object.keys(rec).map((f) => `${quoteIdent(f)} = x.${quoteIdent(f)}`).join(', ');
  const by = actorItem(ctx);
  const [row] = await guarded(t, () =>
    preparedRows<{ r: string }>(readsOf(ctx), `UPDATE ${t.table} AS t SET ${set} FROM jsonb_populate_record(NULL::${t.table}, ?::jsonb) AS x${by ? `, ${by.sql}` : ''} WHERE ${target.sql} RETURNING ${t.jsonSql} AS r`, [
      JSON.stringify(rec),
      ...(by?.params ?? []),
      ...target.params,
    ]),
  );
  if (row) return new JsonText(row.r);
  throw await missingOrDenied(ctx, t, visible, target);
}

/**
 * Why a write by key changed nothing: a record the actor reads (`visible`) but may not write
 * (`allowed` narrower) is a 403; a missing one, or one the actor may not read, a 404.
 */
async function missingOrDenied(ctx: ServiceContext, t: Target, visible: SqlFragment, allowed: SqlFragment): Promise<DomainError> {
  if (allowed !== visible && (await rows(readsOf(ctx), `SELECT 1 FROM ${t.table} t WHERE ${visible.sql}`, visible.params)).length) return permissionDenied();
  return recordNotFound();
}

/** PATCH on the collection: an array of partial records each carrying its key; all or nothing. */
export async function patchRecords(ctx: ServiceContext, scope: TableScope, name: string, body: unknown): Promise<RecordRow[]> {
  const t = await openTarget(ctx, scope, name, 'update');
  const items = batchOf(body, MAX_BULK_PATCH);
  const updatable = await rowsAllowed(ctx, t, 'update');
  return writeTransaction(ctx, async (tx) => {
    const errors: FieldErrors = {};
    const out: RecordRow[] = [];
    for (const [i, item] of items.entries()) {
      const prefix = `${i}.`;
      if (typeof item !== 'object' || item === null || Array.isArray(item)) {
        errors[`${i}`] = ['Expected an object of field values.'];
        continue;
      }
      const rec = item as RecordRow;
      const missing = t.pk.filter((k) => rec[k] === undefined || rec[k] === null);
      if (missing.length) {
        for (const k of missing) errors[`${prefix}${k}`] = ['The key is required to find the record.'];
        continue;
      }
      const row = await patchOne(tx, t, updatable, t.pk.map((k) => rec[k]), rec, prefix, errors);
      if (row) out.push(row);
    }
    if (Object.keys(errors).length) throw validationError(errors, 'Invalid records: nothing was changed.');
    return out;
  });
}

export async function deleteRecord(ctx: ServiceContext, scope: TableScope, name: string, id: string): Promise<void> {
  const t = await openTarget(ctx, scope, name, 'delete');
  const where = keyCondition(t, id);
  if (!where) throw recordNotFound();
  const visible = withinAllowed(t.readable, where);
  const deletable = withinAllowed(await rowsAllowed(ctx, t, 'delete'), visible);
  const by = actorItem(ctx);
  const gone = await guarded(t, () => preparedRows(readsOf(ctx), `DELETE FROM ${t.table} t${by ? ` USING ${by.sql}` : ''} WHERE ${deletable.sql} RETURNING 1`, [...(by?.params ?? []), ...deletable.params]));
  if (!gone.length) throw await missingOrDenied(ctx, t, visible, deletable);
}

/**
 * DELETE on the collection: `ids=a,b` (composite keys: a JSON array of key arrays) →
 * {deleted, ids}; `filter=<JSON conditions>` → {deleted}.
 */
export async function deleteRecords(ctx: ServiceContext, scope: TableScope, name: string, query: Record<string, unknown>): Promise<{ deleted: number; ids?: unknown[] }> {
  const t = await openTarget(ctx, scope, name, 'delete');
  if (typeof query.ids === 'string' && query.filter === undefined) {
    let keys: unknown[];
    if (t.pk.length === 1) keys = query.ids.split(',').filter((x) => x !== '');
    else {
      try {
        keys = JSON.parse(query.ids) as unknown[];
      } catch {
        keys = [];
      }
      if (!Array.isArray(keys) || !keys.every(Array.isArray)) throw fieldError('ids', `Composite keys: a JSON array of [${t.pk.join(', ')}] arrays.`);
    }
    if (!keys.length) throw fieldError('ids', 'Give at least one id.');
    if (keys.length > MAX_BULK_PATCH) throw fieldError('ids', `At most ${MAX_BULK_PATCH} ids per request.`);
    const conds: Filter[] = [];
    for (const k of keys) {
      const cond = keyFilter(t, k as string | unknown[]);
      if (!cond) throw fieldError('ids', 'Every id must be a valid key of the table.');
      conds.push(cond);
    }
    // Records the actor may not read are missing to them: neither deleted nor reported.
    const where = withinAllowed(t.readable, compileOn(t, { op: 'or', args: conds }));
    const keySql = t.pk.length === 1 ? t.columns.get(t.pk[0]!)!.sql! : `jsonb_build_array(${t.pk.map((k) => t.columns.get(k)!.sql).join(', ')})`;
    const allowed = await rowsAllowed(ctx, t, 'delete');
    // All or nothing: one record the actor may not delete refuses the request (the transaction rolls back).
    const gone = await guarded(t, () =>
      writeTransaction(ctx, async (tx) => {
        const deleted = await rows<{ k: unknown; ok: boolean }>(tx, `DELETE FROM ${t.table} t WHERE ${where.sql} RETURNING to_jsonb(${keySql}) AS k, (${allowed.sql}) AS ok`, [...where.params, ...allowed.params]);
        if (deleted.some((d) => !d.ok)) throw permissionDenied();
        return deleted;
      }),
    );
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
    const conditions = parsed as Record<string, unknown>;
    if (Object.keys(conditions).some((k) => k.includes('.'))) await loadRelations(ctx.em, t);
    const matching = withinAllowed(t.readable, compileOn(t, parseQueryFilters(conditions, resolver(t), false)));
    const where = withinAllowed(await rowsAllowed(ctx, t, 'delete'), matching);
    const by = actorItem(ctx);
    const gone = await guarded(t, () => rows(ctx.em, `DELETE FROM ${t.table} t${by ? ` USING ${by.sql}` : ''} WHERE ${where.sql} RETURNING 1`, [...(by?.params ?? []), ...where.params]));
    return { deleted: gone.length };
  }
  throw fieldError('non_field_errors', 'Give either ids=a,b or filter=<JSON conditions> (not both).');
}
