// What the database would refuse in a CSV import (records-csv.ts), found for every row in one
// run, docs/data-tables.md "CSV export and import":
// - duplicate keys within the file: in memory as the rows are read, for keys on plain fields;
// - set-based over a batch of rows (one statement per key and per foreign key: the batch's
//   records as a JSON recordset, EXISTS / NOT EXISTS on the unique index or the referenced key):
//   keys the table already holds, foreign-key values whose record does not exist, and the
//   duplicates within the file of unique indexes on an expression or with a condition (their
//   values computed by PostgreSQL, remembered from the batch on).
// The keys are the primary key (declared or generated), unique fields and unique indexes; the
// foreign keys those of a flat table (the only ones the database enforces). Every expression is
// built from the stored schema (field names quoted, index fragments through compileFragment).
import type { EntityManager } from '@mikro-orm/postgresql';
import { quoteIdent, rows } from '../../db/sql.ts';
import { addFieldError, type FieldErrors } from '../../errors.ts';
import { quoteLiteral } from '../ddl.ts';
import { compileFragment } from '../index-expression.ts';
import { fieldNamesOf, foreignKeysOf } from '../table-schema.ts';
import { appTables, type RecordRow, type Target, type TableView } from './target.ts';

/** A data row of the CSV: its 1-based number, the record it gives (the fields that coerced and passed), its problems. */
export interface ImportRow {
  row: number;
  /** Absent when the row has the wrong number of cells. */
  rec?: RecordRow;
  errors?: FieldErrors;
}

/** Values of a row compared with rows of a table: SQL over the batch's record (`inner`) and over alias `t` of the table (`outer`). */
interface Match {
  /** The fields the values are read from: a row with an error on one of them is not compared. */
  reads: string[];
  inner: string[];
  outer: string[];
  /** A partial unique index's condition, over the record and over `t`. */
  where?: { inner: string; outer: string };
}

interface Key extends Match {
  /** The fields a duplicate is reported on. */
  fields: string[];
  /** The unique index it is (named in the messages), if it is one. */
  index?: string;
  /** Plain fields without a condition: the duplicates within the file are found in memory as the rows are read. */
  plain: boolean;
  /** The key's value (a field's value; several as JSON; computed by PostgreSQL when not plain) → the first row that has it. */
  seen: Map<unknown, number>;
}

interface Reference extends Match {
  table: string;
  /** A reference to this table: the key the referenced fields form, with the local fields in its order. */
  self?: { key: Key; fields: string[] };
}

const MISSING = 'The referenced record does not exist.';
const named = (k: Key) => (k.index ? ` (unique index ${k.index})` : '');
const duplicate = (k: Key, first: number) => `Duplicate: row ${first} has the same ${k.fields.length > 1 ? `values of ${k.fields.join(', ')}` : 'value'}${named(k)}.`;

/** The keys of a table, one per distinct set of values (its primary key first). */
function keysOf(t: TableView): Key[] {
  const json = t.provider !== 'flat_table'; // jsonb, docstore: the record is a JSON body
  const plain = (fields: string[], index?: string): Key => ({
    fields,
    reads: fields,
    index,
    plain: true,
    seen: new Map(),
    inner: fields.map((f) => {
      if (!json) return quoteIdent(f);
      const type = t.columns.get(f)!.pgType;
      return type === 'text' ? `(e.v ->> ${quoteLiteral(f)})` : `(e.v ->> ${quoteLiteral(f)})::${type}`;
    }),
    outer: fields.map((f) => t.columns.get(f)!.sql!),
  });
  const out = [plain(t.pk)];
  if (t.provider === 'docstore') return out;
  const text = (k: Key): Key => ({ ...k, inner: k.fields.map((f) => `(e.v ->> ${quoteLiteral(f)})`), outer: k.fields.map((f) => `(t."data" ->> ${quoteLiteral(f)})`) });
  // jsonb: a composite key and unique fields are unique indexes on `data ->> 'field'` (text).
  if (json && t.pk.length > 1) out[0] = text(out[0]!);
  const same = (a: string[], b: string[]) => a.length === b.length && a.every((f) => b.includes(f));
  for (const f of t.schema.fields) {
    if (f.constraints?.unique && !same([f.name], t.pk)) out.push(json ? text(plain([f.name])) : plain([f.name]));
  }
  if (json) return out;
  const all = new Set(fieldNamesOf(t.schema));
  for (const ix of t.schema.indexes ?? []) {
    if (!ix.unique) continue;
    if (ix.expression === undefined && ix.where === undefined) {
      if (!out.some((k) => k.plain && same(k.fields, ix.fields!))) out.push(plain(ix.fields!, ix.name));
      continue;
    }
    const used = new Set<string>();
    const inner = ix.expression !== undefined ? [compileFragment(ix.expression, all, used)] : ix.fields!.map(quoteIdent);
    const cond = ix.where !== undefined ? compileFragment(ix.where, all, used) : undefined;
    for (const f of ix.fields ?? []) used.add(f);
    const fields = ix.fields ?? [...used];
    // Unqualified names: in the inner select they are the record's, inside EXISTS (…FROM the table t) the table's.
    out.push({ fields, reads: [...used], index: ix.name, plain: false, seen: new Map(), inner, outer: inner, where: cond === undefined ? undefined : { inner: cond, outer: cond } });
  }
  return out;
}

/** The foreign keys of a flat table whose referenced table is materialized. */
async function referencesOf(em: EntityManager, t: Target, keys: Key[]): Promise<Reference[]> {
  const fks = t.provider === 'flat_table' ? foreignKeysOf(t.schema) : [];
  if (!fks.length) return [];
  const tables = await appTables(em, t);
  const out: Reference[] = [];
  for (const fk of fks) {
    const other = tables.get(fk.reference.resource === '' ? t.name : fk.reference.resource);
    if (!other) continue;
    const theirs = other.columnsAs('t');
    // A row may refer to another row of the file (earlier, or later in the same batch).
    const key = other === t ? keys.find((k) => k.plain && k.fields.length === fk.fields.length && k.fields.every((f) => fk.reference.fields.includes(f))) : undefined;
    out.push({
      table: other.table,
      reads: fk.fields,
      inner: fk.fields.map(quoteIdent),
      outer: fk.reference.fields.map((f) => theirs.get(f)!.sql!),
      self: key && { key, fields: key.fields.map((f) => fk.fields[fk.reference.fields.indexOf(f)]!) },
    });
  }
  return out;
}

function flag(item: ImportRow, fields: string[], text: string): void {
  item.errors ??= {};
  for (const f of fields) addFieldError(item.errors, f, text);
}

export interface ImportChecks {
  /** Remembers the row's plain keys; one an earlier row has is an error of this row (a duplicate within the file). */
  track(item: ImportRow): void;
  /**
   * The batch's rows checked against the database (each key and foreign key on the rows without
   * an error on its fields yet): keys the table holds, references to records it lacks, and the
   * duplicates of keys that are not plain within the file (from this batch on).
   */
  check(em: EntityManager, batch: ImportRow[]): Promise<void>;
}

export async function importChecks(em: EntityManager, t: Target): Promise<ImportChecks> {
  const keys = keysOf(t);
  const references = await referencesOf(em, t, keys);
  const flat = t.provider === 'flat_table';
  // A flat record's omitted field gets its default on insert (json_populate_recordset would give NULL).
  const defaults = flat ? t.schema.fields.filter((f) => f.default !== undefined).map((f) => [f.name, f.default] as const) : [];
  /** A row's value of a field as stored: its own, else the default; undefined when the field failed. */
  const valueOf = (item: ImportRow, field: string): unknown => {
    if (item.errors?.[field]) return undefined;
    const v = item.rec![field];
    return v === undefined ? defaults.find(([f]) => f === field)?.[1] : v;
  };
  /** The values of `fields` as one comparable value (a field's own value; several as JSON); undefined when one is null or absent. */
  const keyValue = (item: ImportRow, fields: string[]): unknown => {
    if (fields.length === 1) {
      const v = valueOf(item, fields[0]!);
      return v === null || v === undefined ? undefined : typeof v === 'object' ? JSON.stringify(v) : v;
    }
    const values = fields.map((f) => valueOf(item, f));
    return values.some((v) => v === null || v === undefined) ? undefined : JSON.stringify(values);
  };

  /**
   * One statement over the batch's rows that can be compared (a record, no error on the fields
   * `m` reads), as `build` writes it from two pieces: `FROM (…) AS r WHERE …` — the rows (columns
   * _n, _k0…) whose values are all non-null and that meet the index's condition — and the
   * `EXISTS (…)` of a row of `table` (alias t) that matches. Its rows come back with their items.
   */
  const query = async <R extends { _n: number }>(batch: ImportRow[], m: Match, table: string, build: (r: string, exists: string) => string): Promise<(R & { item: ImportRow })[]> => {
    const items = batch.filter((x) => x.rec && !m.reads.some((f) => x.errors?.[f]));
    if (!items.length) return [];
    const records = items.map((x) => {
      if (!defaults.length) return x.rec;
      const rec = { ...x.rec };
      for (const [f, v] of defaults) if (rec[f] === undefined && !x.errors?.[f]) rec[f] = v;
      return rec;
    });
    const values = m.inner.map((sql, i) => `${sql} AS _k${i}`).join(', ');
    const where = m.where ? `(${m.where.inner})` : 'true';
    const inner = flat
      ? `SELECT row_number() OVER () AS _n, ${values}, ${where} AS _w FROM json_populate_recordset(NULL::${t.table}, ?::json) AS x`
      : `SELECT e._n, ${values}, true AS _w FROM json_array_elements(?::json) WITH ORDINALITY AS e(v, _n)`;
    const present = m.inner.map((_, i) => `r._k${i} IS NOT NULL`).join(' AND ');
    const matches = m.outer.map((sql, i) => `${sql} = r._k${i}`).join(' AND ') + (m.where ? ` AND (${m.where.outer})` : '');
    const select = `FROM (${inner}) AS r WHERE r._w AND ${present}`;
    const found = await rows<R>(em, build(select, `EXISTS (SELECT 1 FROM ${table} t WHERE ${matches})`), [JSON.stringify(records)]);
    return found.map((r) => ({ ...r, item: items[Number(r._n) - 1]! }));
  };

  return {
    track(item) {
      if (!item.rec) return;
      for (const k of keys) {
        if (!k.plain) continue;
        const v = keyValue(item, k.fields);
        if (v === undefined) continue;
        const first = k.seen.get(v);
        if (first === undefined) k.seen.set(v, item.row);
        else flag(item, k.fields, duplicate(k, first));
      }
    },

    async check(em, batch) {
      for (const k of keys) {
        const exists = `A record with ${k.fields.length > 1 ? 'these values' : 'this value'} already exists${named(k)}.`;
        if (k.plain) {
          for (const { item } of await query(batch, k, t.table, (r, hit) => `SELECT r._n ${r} AND ${hit}`)) flag(item, k.fields, exists);
          continue;
        }
        // Not plain: every comparable row with its value (as PostgreSQL computes it), in order.
        const found = await query<{ _n: number; v: string; hit: boolean }>(batch, k, t.table, (r, hit) => {
          const value = k.inner.length > 1 ? `json_build_array(${k.inner.map((_, i) => `r._k${i}`).join(', ')})::text` : 'r._k0::text';
          return `SELECT r._n, ${value} AS v, ${hit} AS hit ${r} ORDER BY r._n`;
        });
        for (const { item, v, hit } of found) {
          const first = k.seen.get(v);
          if (first !== undefined) flag(item, k.fields, duplicate(k, first));
          else {
            k.seen.set(v, item.row);
            if (hit) flag(item, k.fields, exists);
          }
        }
      }
      for (const ref of references) {
        for (const { item } of await query(batch, ref, ref.table, (r, hit) => `SELECT r._n ${r} AND NOT ${hit}`)) {
          if (ref.self?.key.seen.has(keyValue(item, ref.self.fields))) continue; // a row of the file
          flag(item, ref.reads, MISSING);
        }
      }
    },
  };
}
