// Writing records: validation against the table schema, set-based inserts, updates and
// deletes per provider, and constraint violations turned into field-keyed errors.
// docs/data-tables.md "Records API".
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ValidateFunction } from 'ajv';
import { preparedRows, quoteIdent, rows } from '../../db/sql.ts';
import { DomainError, addFieldError, fieldError, notFound, validationError, type FieldErrors } from '../../errors.ts';
import { quoteLiteral } from '../ddl.ts';
import { recordCaster, toStored, type RecordCast } from '../field-types.ts';
import { coerceValue, type Filter, type SqlFragment } from '../query/filter.ts';
import { recordProblems, recordValidator } from '../record-validator.ts';
import { declaredKey } from '../table-schema.ts';
import { selectRecords } from './read.ts';
import type { RecordRow, TableView } from './target.ts';

export const recordNotFound = () => notFound('Record');

const isObject = (v: unknown): v is RecordRow => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The condition selecting one record by its key as the URL carries it: the value of a
 * single-field key; for a composite key the values in primaryKey order, comma-separated or as
 * a JSON array. Undefined when the text cannot be a key (then nothing matches: 404).
 */
export function keyFilter(t: TableView, id: string | unknown[]): Filter | undefined {
  let parts: unknown[];
  if (Array.isArray(id)) parts = id;
  else if (t.pk.length === 1) parts = [id];
  else if (id.startsWith('[')) {
    try {
      parts = JSON.parse(id) as unknown[];
    } catch {
      return undefined;
    }
    if (!Array.isArray(parts)) return undefined;
  } else parts = id.split(',');
  if (parts.length !== t.pk.length) return undefined;
  const args: Filter[] = [];
  for (const [i, field] of t.pk.entries()) {
    const value = parts[i];
    try {
      if (value === null || value === undefined) return undefined;
      coerceValue(field, t.columns.get(field)!, value);
    } catch {
      return undefined;
    }
    args.push({ op: 'eq', field, value });
  }
  return args.length === 1 ? args[0]! : { op: 'and', args };
}

/** The table's cast and compiled record validator, kept beside its (cached) view: one lookup per view, not per record. */
const checks = new WeakMap<TableView, { cast: RecordCast; fn: ValidateFunction }>();
function checksOf(t: TableView): { cast: RecordCast; fn: ValidateFunction } {
  let found = checks.get(t);
  if (!found) checks.set(t, (found = { cast: recordCaster(t.schema), fn: recordValidator(t.schema, t.hash) }));
  return found;
}

/**
 * Every problem of a record, keyed `{prefix}{field}`; the record when it has none. Every write
 * path (create one or many, upsert, patch one or many, CSV import) comes here: the given values
 * are cast to their logical values first (field-types.ts castValue, in place: `12,5` with
 * decimalChar `,` becomes 12.5, `yes` in trueValues true, a missing value null), then validated.
 */
export function recordErrors(t: TableView, record: unknown, prefix: string, out: FieldErrors, patched?: RecordRow): RecordRow | undefined {
  if (!isObject(record)) {
    out[prefix ? prefix.slice(0, -1) : 'non_field_errors'] = ['Expected an object of field values.'];
    return undefined;
  }
  let errors: FieldErrors | undefined;
  const add = (field: string, text: string) => addFieldError((errors ??= {}), field, text);
  const own = patched ?? record;
  if (t.provider !== 'docstore') for (const key in own) if (Object.hasOwn(own, key) && !t.columns.has(key)) add(key, `Unknown field "${key}".`);
  if (t.provider !== 'flat_table' && Object.hasOwn(own, 'id') && !(t.provider === 'jsonb' && declaredKey(t.schema))) {
    try {
      coerceValue('id', { column: 'id', pgType: 'uuid' }, own.id);
    } catch {
      add('id', 'Must be a UUID.');
    }
  }
  const { cast, fn } = checksOf(t);
  // A patch casts its own values (into the merged record too); stored values are logical already.
  const uncast = cast(own, patched ? record : undefined);
  if (uncast) for (const [field, text] of Object.entries(uncast)) add(field, text);
  if (t.provider === 'jsonb') for (const k of declaredKey(t.schema) ?? []) if (record[k] === undefined || record[k] === null) add(k, 'This field is required.');
  if (!fn(record)) for (const x of recordProblems(fn, record, uncast)) add(x.field || 'non_field_errors', x.missing ? 'This field is required.' : x.message);
  if (errors) {
    // A patch is validated as the record it produces; only the patched fields can be at fault
    // (stored values such as intervals come back in PostgreSQL's text form, not the schema's).
    const kept = Object.entries(errors).filter(([f]) => !patched || Object.hasOwn(patched, f));
    for (const [f, list] of kept) for (const text of list) addFieldError(out, `${prefix}${f}`, text);
    if (kept.length) return undefined;
  }
  toStored(t.schema.fields, record);
  if (patched) toStored(t.schema.fields, patched);
  return record;
}

// --- constraint violations --------------------------------------------------------------------

interface PgError { code?: string; constraint?: string; detail?: string; column?: string }

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
function fieldsOf(t: TableView, pg: PgError): string[] {
  let key = pg.detail?.match(/^Key \((.*?)\)=/)?.[1];
  const names = [...t.columns.keys()];
  // A jsonb table's declared single key is its `id` column.
  if (key === 'id' && t.provider === 'jsonb' && !t.columns.has('id')) key = t.pk[0];
  if (key) {
    const words = new Set(key.split(/[^A-Za-z0-9_]+/));
    const hits = names.filter((f) => words.has(f) || key.includes(`'${f}'`));
    if (hits.length) return hits;
  }
  if (pg.column && t.columns.has(pg.column)) return [pg.column];
  const byName = names.filter((f) => pg.constraint?.includes(`_${f}_`) || pg.constraint?.endsWith(`_${f}`));
  return byName.length ? [byName.sort((x, y) => y.length - x.length)[0]!] : [];
}

/** Constraint violations as field-keyed 400/409 errors; never the raw database message. */
export function violation(t: TableView, err: unknown, prefix = ''): DomainError | undefined {
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

export async function guarded<T>(t: TableView, work: () => Promise<T>, prefix = ''): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw violation(t, err, prefix) ?? err;
  }
}

// --- inserts and updates ---------------------------------------------------------------------

/** The id and body expressions of a JSON record `e.v` in a jsonb or docstore table. */
function jsonRow(t: TableView): { id: string; body: string; keyed: boolean } {
  const key = declaredKey(t.schema);
  if (t.provider === 'jsonb' && key?.length === 1) return { id: `(e.v ->> ${quoteLiteral(key[0]!)})::${t.columns.get(key[0]!)!.pgType}`, body: 'e.v', keyed: true };
  if (t.provider === 'jsonb' && key) return { id: 'gen_random_uuid()', body: 'e.v', keyed: false };
  return { id: `coalesce((e.v ->> 'id')::uuid, gen_random_uuid())`, body: `(e.v - 'id')`, keyed: false };
}

/** Whether the record gives a value to these fields and to no other. */
function givesExactly(rec: RecordRow, cols: string[]): boolean {
  let n = 0;
  for (const k in rec) if (rec[k] !== undefined) n++;
  if (n !== cols.length) return false;
  for (const c of cols) if (rec[c] === undefined) return false;
  return true;
}

/**
 * Inserts validated records in one statement per set of given fields (records omitting a
 * field get its default), in their order; the stored records come back in the same order — as
 * PostgreSQL's JSON text with `'json'` on a table that has it (TableView.jsonSql), else as
 * records; with `'nothing'`, nothing comes back (a CSV import: no RETURNING to build and read).
 */
export async function insertRecords(em: EntityManager, t: TableView, records: RecordRow[]): Promise<RecordRow[]>;
export async function insertRecords(em: EntityManager, t: TableView, records: RecordRow[], as: 'json', by?: SqlFragment): Promise<RecordRow[] | string[]>;
export async function insertRecords(em: EntityManager, t: TableView, records: RecordRow[], as: 'nothing'): Promise<void>;
/** `by`: a FROM item attributing a statement outside a transaction to its actor (realtime/actor.ts actorItem). */
export async function insertRecords(em: EntityManager, t: TableView, records: RecordRow[], as: 'records' | 'json' | 'nothing' = 'records', by?: SqlFragment): Promise<unknown[] | void> {
  const also = by ? `, ${by.sql}` : '';
  const byParams = by?.params ?? [];
  if (t.provider !== 'flat_table') {
    const { id, body } = jsonRow(t);
    const column = t.provider === 'jsonb' ? 'data' : 'doc';
    const sql = `INSERT INTO ${t.table} AS t (id, ${column}) SELECT ${id}, ${body} FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY AS e(v, n)${also} ORDER BY e.n`;
    const params = [JSON.stringify(records), ...byParams];
    if (as !== 'nothing') return selectRecords(em, t, `${sql} RETURNING ${t.recordSql('t')} AS r`, params);
    await rows(em, sql, params);
    return [];
  }
  const text = as === 'json' ? t.jsonSql : undefined;
  // Named (prepared once per connection) outside a transaction: a single record's create is one
  // statement, one round trip (records.service.ts createRecords).
  const returned = async (sql: string, params: unknown[]): Promise<unknown[]> => {
    if (as === 'nothing') {
      await preparedRows(em, sql, params);
      return [];
    }
    return text ? (await preparedRows<{ r: string }>(em, `${sql} RETURNING ${text} AS r`, params)).map((x) => x.r) : selectRecords(em, t, `${sql} RETURNING to_jsonb(t.*) AS r`, params);
  };
  // Records grouped by the set of fields they give; a record with exactly the fields of the
  // one before it joins that one's group without building a key (a batch usually has one set).
  const groups = new Map<string, { cols: string[]; items: number[] }>();
  let last: { cols: string[]; items: number[] } | undefined;
  for (let i = 0; i < records.length; i++) {
    const rec = records[i]!;
    if (last && givesExactly(rec, last.cols)) {
      last.items.push(i);
      continue;
    }
    const cols = Object.keys(rec).filter((k) => rec[k] !== undefined).sort();
    const key = cols.join(',');
    last = groups.get(key);
    if (!last) groups.set(key, (last = { cols, items: [] }));
    last.items.push(i);
  }
  const out: unknown[] = new Array(records.length);
  for (const { cols, items } of groups.values()) {
    let stored: unknown[];
    if (!cols.length) {
      stored = [];
      for (let k = 0; k < items.length; k++) stored.push(...(await returned(`INSERT INTO ${t.table} AS t DEFAULT VALUES`, [])));
    } else {
      const list = cols.map(quoteIdent);
      stored = await returned(
        // `json`, not `jsonb`: parsed in one pass, without building a jsonb tree (a third of the
        // statement's time for 10,000 records); the function returns the rows in array order.
        `INSERT INTO ${t.table} AS t (${list.join(', ')}) SELECT ${list.map((c) => `x.${c}`).join(', ')} FROM json_populate_recordset(NULL::${t.table}, ?::json) AS x${also}`,
        [JSON.stringify(items.length === records.length ? records : items.map((i) => records[i])), ...byParams],
      );
    }
    items.forEach((i, k) => (out[i] = stored[k]));
  }
  return out;
}

/**
 * Which record of a batch violates a constraint: the records inserted one by one in a
 * transaction (a savepoint inside one) that is rolled back; the first failing one's index and
 * its error. Used only on the error path of a set-based insert.
 */
export async function failingRecord(em: EntityManager, t: TableView, records: RecordRow[]): Promise<{ index: number; error: unknown } | undefined> {
  let found: { index: number; error: unknown } | undefined;
  const rollback = Symbol('rollback');
  await em
    .transactional(async (tx) => {
      for (const [index, rec] of records.entries()) {
        try {
          await insertRecords(tx as EntityManager, t, [rec]);
        } catch (error) {
          if (violation(t, error)) found = { index, error };
          break;
        }
      }
      throw rollback;
    })
    .catch((err: unknown) => {
      if (err !== rollback) throw err;
    });
  return found;
}

/** Replaces the given fields of the record matched by `where` (flat: SET columns; JSON: the whole merged body). */
export async function updateRecord(em: EntityManager, t: TableView, where: { sql: string; params: unknown[] }, patch: RecordRow, merged: RecordRow): Promise<RecordRow | undefined> {
  if (t.provider === 'flat_table') {
    const fields = Object.keys(patch);
    if (!fields.length) return undefined;
    const set = fields.map((f) => `${quoteIdent(f)} = x.${quoteIdent(f)}`).join(', ');
    const [row] = await selectRecords(
      em,
      t,
      `UPDATE ${t.table} AS t SET ${set} FROM jsonb_populate_record(NULL::${t.table}, ?::jsonb) AS x WHERE ${where.sql} RETURNING to_jsonb(t.*) AS r`,
      [JSON.stringify(patch), ...where.params],
    );
    return row;
  }
  const { id, body, keyed } = jsonRow(t);
  const column = t.provider === 'jsonb' ? 'data' : 'doc';
  const newId = keyed ? `id = ${id}, ` : '';
  const [row] = await selectRecords(
    em,
    t,
    `UPDATE ${t.table} AS t SET ${newId}${column} = ${body}, updated_at = now() FROM (SELECT ?::jsonb AS v) AS e WHERE ${where.sql} RETURNING ${t.recordSql('t')} AS r`,
    [JSON.stringify(merged), ...where.params],
  );
  return row;
}

/** Checks a batch's size and shape. */
export function batchOf(body: unknown, max: number): unknown[] {
  if (!Array.isArray(body)) throw fieldError('non_field_errors', 'Expected an array of records.');
  if (!body.length) throw fieldError('non_field_errors', 'Send at least one record.');
  if (body.length > max) throw fieldError('non_field_errors', `At most ${max} records per request.`);
  return body;
}
