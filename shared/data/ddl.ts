// DDL of a validated Table Schema, per provider (docs/data-tables.md): the statements that
// create the physical table in a site schema. Identifiers go through quoteIdent only;
// literals through quoteLiteral only (quotes doubled, NUL refused); index fragments through
// the grammar of compileFragment. Nothing from the document is interpolated raw.
import { quoteIdent } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { compileFragment } from './index-expression.ts';
import {
  GENERATED_KEY, anchored, declaredKey, fieldNamesOf, foreignKeysOf, primaryKeyOf,
  type Field, type ForeignKey, type IndexDef, type TableSchema,
} from './table-schema.ts';

export type ProviderType = 'flat_table' | 'jsonb' | 'docstore';

/** A PostgreSQL string literal: quotes doubled, NUL refused (E'' forms are never produced). */
export function quoteLiteral(value: string): string {
  if (value.includes('\0')) throw new Error('A literal may not contain NUL characters.');
  return `'${value.replace(/'/g, "''")}'`;
}

export const YEARMONTH_RE = '^[0-9]{4}-(0[1-9]|1[0-2])$';

/** The PostgreSQL column type of a Frictionless field. */
export function columnType(f: Pick<Field, 'type' | 'format'>): string {
  switch (f.type) {
    case 'string': return f.format === 'uuid' ? 'uuid' : 'text';
    case 'integer': return 'bigint';
    case 'number': return 'double precision';
    case 'boolean': return 'boolean';
    case 'date': return 'date';
    case 'time': return 'time';
    case 'datetime': return 'timestamptz';
    case 'year': return 'integer';
    case 'yearmonth': return 'text';
    case 'duration': return 'interval';
    default: return 'jsonb'; // object, array, geojson, geopoint, any
  }
}

/** A value as a typed SQL literal for DEFAULT and CHECK: numbers and booleans checked, the rest quoted. */
function sqlLiteral(f: Field, value: unknown): string {
  const type = columnType(f);
  if (value === null) return 'NULL';
  if (type === 'jsonb') return `${quoteLiteral(JSON.stringify(value))}::jsonb`;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`Field '${f.name}': not a finite number.`);
    return type === 'text' || type === 'uuid' ? `${quoteLiteral(String(value))}::${type}` : String(value);
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value !== 'string') return `${quoteLiteral(JSON.stringify(value))}::${type}`;
  return `${quoteLiteral(value)}::${type}`;
}

/** `a{app_id}_{name}`, cut to 63 characters; `suffix` (2, 3, …) for collisions. */
export function physicalTableName(appId: number, name: string, suffix = 1): string {
  const tail = suffix > 1 ? `_${suffix}` : '';
  return `a${appId}_${name}`.slice(0, 63 - tail.length) + tail;
}

/** The CHECK expressions of a flat column (constraints, yearmonth's form), in a stable order. */
export function fieldChecks(f: Field): string[] {
  const c = f.constraints ?? {};
  const col = quoteIdent(f.name);
  const type = columnType(f);
  const checks: string[] = [];
  const numericType = ['bigint', 'double precision', 'integer'].includes(type);
  if (c.minimum !== undefined) checks.push(`${col} >= ${numericType ? Number(c.minimum) : sqlLiteral(f, c.minimum)}`);
  if (c.maximum !== undefined) checks.push(`${col} <= ${numericType ? Number(c.maximum) : sqlLiteral(f, c.maximum)}`);
  const lengthOf = type === 'jsonb' ? (f.type === 'array' ? `jsonb_array_length(${col})` : undefined) : `char_length(${col}::text)`;
  if (lengthOf && c.minLength !== undefined) checks.push(`${lengthOf} >= ${Number(c.minLength)}`);
  if (lengthOf && c.maxLength !== undefined) checks.push(`${lengthOf} <= ${Number(c.maxLength)}`);
  if (c.pattern !== undefined && type !== 'jsonb') checks.push(`${col}::text ~ ${quoteLiteral(anchored(c.pattern))}`);
  if (f.type === 'yearmonth') checks.push(`${col} ~ ${quoteLiteral(YEARMONTH_RE)}`);
  if (c.enum) checks.push(`${col} IN (${c.enum.map((v) => sqlLiteral(f, v)).join(', ')})`);
  return checks;
}

/** `DEFAULT …` of a field, or undefined. */
export const defaultSql = (f: Field): string | undefined => (f.default === undefined ? undefined : sqlLiteral(f, f.default));

/** A flat column's definition: type, NOT NULL, UNIQUE, DEFAULT and CHECKs (`pk`: the key's fields). */
export function columnDefinition(f: Field, pk: string[]): string {
  const c = f.constraints ?? {};
  const parts = [quoteIdent(f.name), columnType(f)];
  if (c.required || pk.includes(f.name)) parts.push('NOT NULL');
  if (c.unique && !(pk.length === 1 && pk[0] === f.name)) parts.push('UNIQUE');
  const dflt = defaultSql(f);
  if (dflt !== undefined) parts.push(`DEFAULT ${dflt}`);
  for (const check of fieldChecks(f)) parts.push(`CHECK (${check})`);
  return parts.join(' ');
}

function flatColumns(s: TableSchema): string[] {
  const pk = primaryKeyOf(s);
  const cols: string[] = [];
  if (!declaredKey(s)) cols.push(`${quoteIdent(GENERATED_KEY)} uuid NOT NULL DEFAULT gen_random_uuid()`);
  for (const f of s.fields) cols.push(columnDefinition(f, pk));
  return cols;
}

/**
 * The full-text vector of the records API's `search` (the expression of the table's GIN index,
 * so the planner uses it): the text fields of a flat table, every string of a JSON record.
 * Undefined when a flat table has no text field.
 */
export function searchVector(provider: ProviderType, s: TableSchema, column: (name: string) => string): string | undefined {
  if (provider !== 'flat_table') return `to_tsvector('simple'::regconfig, ${column(provider === 'jsonb' ? 'data' : 'doc')})`;
  const text = s.fields.filter((f) => columnType(f) === 'text');
  if (!text.length) return undefined;
  return `to_tsvector('simple'::regconfig, ${text.map((f) => `coalesce(${column(f.name)}, '')`).join(` || ' ' || `)})`;
}

export interface DdlOptions {
  schema: string;
  table: string;
  provider: ProviderType;
  /** Physical table names of foreign-key targets by table name ("" or the table itself: this one). */
  resolveTable?: (resource: string) => string;
}

/** The statements creating the table, its keys and indexes (run them in one transaction). */
export function createTableDdl(s: TableSchema, o: DdlOptions): string[] {
  const q = quotedSchema(o.schema);
  const t = `${q}.${quoteIdent(o.table)}`;
  const idx = (name: string) => ownName(o.table, name);
  if (o.provider === 'docstore') {
    return [
      `CREATE TABLE ${t} (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), doc jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())`,
      `CREATE INDEX ${idx('doc_gin')} ON ${t} USING gin (doc jsonb_path_ops)`,
      `CREATE INDEX ${idx('_search')} ON ${t} USING gin (${searchVector('docstore', s, quoteIdent)})`,
    ];
  }
  if (o.provider === 'jsonb') {
    const pk = declaredKey(s);
    const keyField = pk?.length === 1 ? s.fields.find((f) => f.name === pk[0]) : undefined;
    const idType = keyField ? columnType(keyField) : 'uuid';
    const idDefault = idType === 'uuid' ? ' DEFAULT gen_random_uuid()' : '';
    // Keys and unique fields the database cannot see inside `data`: unique expression indexes.
    const unique = s.fields.filter((f) => f.constraints?.unique && !(pk?.length === 1 && pk[0] === f.name)).map((f) => [f.name]);
    if (pk && pk.length > 1) unique.push(pk);
    return [
      `CREATE TABLE ${t} (id ${idType} PRIMARY KEY${idDefault}, data jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())`,
      `CREATE INDEX ${idx('data_gin')} ON ${t} USING gin (data)`,
      `CREATE INDEX ${idx('_search')} ON ${t} USING gin (${searchVector('jsonb', s, quoteIdent)})`,
      ...unique.map((fields) => `CREATE UNIQUE INDEX ${idx(`_u_${fields.join('_')}`)} ON ${t} (${fields.map((f) => `(data ->> ${quoteLiteral(f)})`).join(', ')})`),
    ];
  }
  const cols = flatColumns(s);
  cols.push(`CONSTRAINT ${idx('pkey')} PRIMARY KEY (${primaryKeyOf(s).map(quoteIdent).join(', ')})`);
  foreignKeysOf(s).forEach((fk, i) => cols.push(`CONSTRAINT ${idx(`fk${i + 1}`)} ${foreignKeySql(fk, o)}`));
  const out = [`CREATE TABLE ${t} (\n  ${cols.join(',\n  ')}\n)`];
  const search = searchVector('flat_table', s, quoteIdent);
  if (search) out.push(`CREATE INDEX ${idx('_search')} ON ${t} USING gin (${search})`);
  for (const ix of s.indexes ?? []) out.push(...indexDdl(s, ix, o));
  return out;
}

/** A physical name of the table's own: `{table}_{name}`, cut to 63 characters, quoted. */
export const ownName = (table: string, name: string): string => quoteIdent(`${table}_${name}`.slice(0, 63));

/** `FOREIGN KEY (…) REFERENCES … ON DELETE …` of a flat table's foreign key. */
export function foreignKeySql(fk: ForeignKey, o: Omit<DdlOptions, 'provider'>): string {
  const target = fk.reference.resource === '' ? o.table : o.resolveTable ? o.resolveTable(fk.reference.resource) : fk.reference.resource;
  const onDelete = fk['x-actions']?.onDelete ?? 'RESTRICT';
  return `FOREIGN KEY (${fk.fields.map(quoteIdent).join(', ')}) REFERENCES ${quotedSchema(o.schema)}.${quoteIdent(target)} (${fk.reference.fields.map(quoteIdent).join(', ')}) ON DELETE ${onDelete}`;
}

/** The statements creating one declared index of a flat table (and its comment). */
export function indexDdl(s: TableSchema, ix: IndexDef, o: Pick<DdlOptions, 'schema' | 'table'>): string[] {
  const t = `${quotedSchema(o.schema)}.${quoteIdent(o.table)}`;
  const all = new Set(fieldNamesOf(s));
  const pkFields = primaryKeyOf(s);
  // A plain btree index on fields also carries the primary key, so that a page sorted on those
  // fields (the records API appends the key) is read in index order without a sort step.
  const keyed = ix.expression === undefined && !ix.unique && (ix.method ?? 'btree') === 'btree' ? [...ix.fields!, ...pkFields.filter((k) => !ix.fields!.includes(k))] : ix.fields;
  const target = ix.expression !== undefined ? `(${compileFragment(ix.expression, all)})` : keyed!.map(quoteIdent).join(', ');
  const where = ix.where !== undefined ? ` WHERE ${compileFragment(ix.where, all)}` : '';
  const name = ownName(o.table, ix.name);
  const out = [`CREATE ${ix.unique ? 'UNIQUE ' : ''}INDEX ${name} ON ${t} USING ${ix.method ?? 'btree'} (${target})${where}`];
  if (ix.comment) out.push(`COMMENT ON INDEX ${quotedSchema(o.schema)}.${name} IS ${quoteLiteral(ix.comment)}`);
  return out;
}

export const dropTableDdl = (schema: string, table: string): string => `DROP TABLE IF EXISTS ${quotedSchema(schema)}.${quoteIdent(table)}`;
