// The plan of a schema migration (spec Part 2 §4 "Migration rules"): the difference between a
// materialized table's stored schema and a new one, as steps, each with its SQL, its rollback
// SQL, whether it is safe and what it costs. Pure: what the database holds (constraint names,
// row count, foreign-key targets) comes in as facts. docs/migrations.md.
import { createHash } from 'node:crypto';
import { quoteIdent } from '../../db/sql.ts';
import { quotedSchema } from '../../tenancy/schema.ts';
import {
  columnDefinition, columnType, defaultSql, fieldChecks, foreignKeySql, indexDdl, ownName, searchVector, type ProviderType,
} from '../ddl.ts';
import { hasEdges } from '../graph/schema.ts';
import {
  declaredKey, foreignKeysOf, primaryKeyOf, type Field, type ForeignKey, type IndexDef, type TableSchema,
} from '../table-schema.ts';

/** One statement; `params` bound as $1…; `expectNone`: a query that must return no row, else the step fails with that message. */
export interface Statement {
  sql: string;
  params?: unknown[];
  expectNone?: string;
}

/** What a step costs: nothing but the catalog, a read of every row, or a rewrite of every row. */
export type Cost = 'metadata' | 'scan' | 'rewrite';

export interface Step {
  type: string;
  column?: string;
  sql: Statement[];
  rollback: Statement[];
  is_safe: boolean;
  /** Why an unsafe step is unsafe (the 400's message). */
  unsafe?: string;
  cost: Cost;
  /** What the step or its rollback cannot keep or restore. */
  warnings: string[];
}

/** What the database says of the physical table. */
export interface Catalog {
  /** Constraints of the table: name, kind (c check, u unique, f foreign key, p primary key), columns. */
  constraints: { name: string; type: string; columns: string[] }[];
  /** Estimated rows. */
  rows: number;
}

export interface PlanInput {
  schema: string;
  table: string;
  provider: ProviderType;
  old: TableSchema;
  /** The new schema as sent, `x-rename-from` included. */
  next: TableSchema;
  catalog: Catalog;
  /** Physical table of a foreign key's target, if materialized (the table itself: '' or its name). */
  resolveTable: (resource: string) => string | undefined;
  /** This table's columns that other tables' foreign keys reference: column → those tables. */
  referenced: ReadonlyMap<string, string[]>;
  /** The companions' statements (graph/ddl.ts), when the hierarchy is switched on or off. */
  edges?: { create: string[]; drop: string[] };
}

export interface Plan {
  steps: Step[];
  /** Changes no flag allows (a primary key's change, an unknown x-rename-from …): a 400. */
  errors: string[];
  /** The new schema as stored: `x-rename-from` applied and stripped. */
  stored: TableSchema;
}

const hash8 = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 8);
const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
const s = (sql: string): Statement => ({ sql });

/** PostgreSQL column types a value converts to without loss (widening); the reverse is narrowing. */
const WIDER: Record<string, readonly string[]> = {
  integer: ['bigint', 'double precision', 'text', 'jsonb'],
  bigint: ['double precision', 'text', 'jsonb'],
  'double precision': ['text', 'jsonb'],
  date: ['timestamptz', 'text', 'jsonb'],
  timestamptz: ['text', 'jsonb'],
  time: ['text', 'jsonb'],
  interval: ['text', 'jsonb'],
  boolean: ['text', 'jsonb'],
  uuid: ['text', 'jsonb'],
  text: ['jsonb'],
  jsonb: ['text'],
};
export type TypeChange = 'widen' | 'narrow' | 'incompatible';
export function typeChange(from: string, to: string): TypeChange {
  if (WIDER[from]?.includes(to)) return 'widen';
  if (WIDER[to]?.includes(from)) return 'narrow';
  return 'incompatible';
}

/** The USING expression of a column's type change. */
function converted(col: string, from: string, to: string): string {
  if (to === 'jsonb') return `to_jsonb(${col})`;
  if (from === 'jsonb' && to === 'text') return `${col} #>> '{}'`;
  return `${col}::${to}`;
}

/** JSON types a document field's values may have (jsonb and docstore providers). */
function jsonTypes(f: Field): string[] {
  switch (f.type) {
    case 'integer': case 'number': case 'year': return ['number'];
    case 'boolean': return ['boolean'];
    case 'object': case 'geojson': return ['object'];
    case 'array': return ['array'];
    case 'geopoint': return ['string', 'array', 'object'];
    case 'any': return ['string', 'number', 'boolean', 'object', 'array'];
    default: return ['string'];
  }
}

const required = (f: Field, pk: string[]): boolean => f.constraints?.required === true || pk.includes(f.name);
const unique = (f: Field, pk: string[]): boolean => f.constraints?.unique === true && !(pk.length === 1 && pk[0] === f.name);
const renamed = (f: Field, name: string): Field => ({ ...f, name });

/** The new schema without `x-rename-from` (what is stored and hashed). */
export function stripRenames(doc: TableSchema): TableSchema {
  return { ...doc, fields: doc.fields.map(({ 'x-rename-from': _r, ...f }) => f) };
}

/**
 * Pairs of (old field, new field): by `x-rename-from`, else by name. An `x-rename-from` naming a
 * field the old schema lacks is ignored when the new name is already there (applied before),
 * else an error.
 */
function pairFields(old: TableSchema, next: TableSchema, errors: string[]): { pairs: [Field, Field][]; added: Field[]; dropped: Field[]; renames: [string, string][] } {
  const oldByName = new Map(old.fields.map((f) => [f.name, f]));
  const taken = new Set<string>();
  const renames: [string, string][] = [];
  const pairs: [Field, Field][] = [];
  const added: Field[] = [];
  const byName: Field[] = [];
  const keeps = (name: string) => next.fields.some((g) => g.name === name && (g['x-rename-from'] === undefined || g['x-rename-from'] === name));
  for (const f of next.fields) {
    const from = f['x-rename-from'];
    if (from === undefined || from === f.name || (!oldByName.has(from) && oldByName.has(f.name))) { byName.push(f); continue; }
    const o = oldByName.get(from);
    if (!o) errors.push(`Field '${f.name}': x-rename-from '${from}' is not a field of the current schema.`);
    else if (taken.has(from)) errors.push(`Field '${f.name}': field '${from}' is renamed twice.`);
    else if (keeps(from)) errors.push(`Field '${f.name}': x-rename-from '${from}' is still a field of the new schema (a rename moves the column; to copy it, add a field).`);
    else {
      taken.add(from);
      renames.push([from, f.name]);
      pairs.push([o, f]);
    }
  }
  for (const f of byName) {
    const o = oldByName.get(f.name);
    if (o && !taken.has(f.name)) { taken.add(f.name); pairs.push([o, f]); } else added.push(f);
  }
  const dropped = old.fields.filter((f) => !taken.has(f.name));
  return { pairs, added, dropped, renames };
}

/**
 * The migration from `old` to `next`. Steps run in this order: drop what changes (foreign keys,
 * indexes, constraints, defaults of retyped columns), drop columns, rename, add columns, change
 * types, nullability and defaults, add constraints, foreign keys and indexes, the search index,
 * the edges table. Rollback runs the steps' rollback statements in reverse.
 */
export function planMigration(input: PlanInput): Plan {
  const errors: string[] = [];
  const { old, next, table, provider } = input;
  const stored = stripRenames(next);
  const t = `${quotedSchema(input.schema)}.${quoteIdent(table)}`;
  const { pairs, added, dropped, renames } = pairFields(old, next, errors);
  const toNew = new Map(renames);
  const newName = (n: string) => toNew.get(n) ?? n;
  const oldPk = primaryKeyOf(old);
  const newPk = primaryKeyOf(stored);
  if (!same(oldPk.map(newName), newPk) || (declaredKey(old) === undefined) !== (declaredKey(stored) === undefined)) {
    errors.push(`primaryKey cannot change on a materialized table (from [${oldPk.join(', ')}] to [${newPk.join(', ')}]); create a new table and copy the records.`);
  }
  for (const [o, n] of pairs) {
    if (oldPk.includes(o.name) && columnType(o) !== columnType(n)) errors.push(`Field '${n.name}': the type of a primary key field cannot change on a materialized table (foreign keys and edges reference it).`);
  }
  for (const [from, refs] of input.referenced) {
    const pair = pairs.find(([o]) => o.name === from);
    const what = !pair ? 'dropped' : pair[1].name !== from ? 'renamed' : columnType(pair[0]) !== columnType(pair[1]) ? 'retyped' : undefined;
    if (what) errors.push(`Field '${from}' cannot be ${what}: foreign keys of ${refs.join(', ')} reference it; change those tables first.`);
  }
  const steps = provider === 'flat_table'
    ? flatSteps({ input, t, pairs, added, dropped, renames, stored, oldPk, newPk, newName, errors })
    : documentSteps({ input, t, pairs, added, dropped, stored, newPk });
  if (hasEdges(old) !== hasEdges(stored)) {
    if (!input.edges) errors.push('The hierarchy cannot be switched on this table.');
    else if (hasEdges(stored)) steps.push({ type: 'add_edges_table', sql: input.edges.create.map(s), rollback: input.edges.drop.map(s), is_safe: true, cost: 'metadata', warnings: ['A rollback drops the edges table with its edges.'] });
    else {
      steps.push({
        type: 'drop_edges_table', sql: input.edges.drop.map(s), rollback: input.edges.create.map(s), is_safe: false, cost: 'metadata',
        unsafe: `hierarchy: switching it off drops the table's edges (${table}_edges)`, warnings: ['Rollback re-creates the edges table empty: its edges are not restored.'],
      });
    }
  }
  return { steps, errors, stored };
}

interface FlatArgs {
  input: PlanInput;
  t: string;
  pairs: [Field, Field][];
  added: Field[];
  dropped: Field[];
  renames: [string, string][];
  stored: TableSchema;
  oldPk: string[];
  newPk: string[];
  newName: (n: string) => string;
  errors: string[];
}

function flatSteps(a: FlatArgs): Step[] {
  const { input, t, stored, oldPk, newPk, newName, errors } = a;
  const { old, table, catalog } = input;
  const col = quoteIdent;
  const alter = (what: string) => s(`ALTER TABLE ${t} ${what}`);
  const named = (kind: string, column: string, text: string) => ownName(table, `${column}`.slice(0, 40) + `_${kind}_${hash8(text)}`);
  const constraintsOf = (type: string, columns: string[]) => catalog.constraints.filter((c) => c.type === type && same(c.columns, columns));
  const pre: Step[] = [], drops: Step[] = [], renameSteps: Step[] = [], adds: Step[] = [], types: Step[] = [], nulls: Step[] = [], post: Step[] = [];

  // Columns: drop, rename, add.
  for (const f of a.dropped) {
    drops.push({
      type: 'drop_column', column: f.name, sql: [alter(`DROP COLUMN ${col(f.name)}`)], rollback: [alter(`ADD COLUMN ${columnDefinition(f, oldPk)}`)],
      is_safe: true, cost: 'metadata', warnings: [`Column '${f.name}' and its values are dropped; a rollback re-adds the column without its values${required(f, oldPk) && f.default === undefined ? ' and fails while the table has rows (the column is NOT NULL without a default)' : ''}.`],
    });
  }
  for (const [from, to] of orderRenames(a.renames, errors)) {
    renameSteps.push({ type: 'rename_column', column: to, sql: [alter(`RENAME COLUMN ${col(from)} TO ${col(to)}`)], rollback: [alter(`RENAME COLUMN ${col(to)} TO ${col(from)}`)], is_safe: true, cost: 'metadata', warnings: [] });
  }
  for (const f of a.added) {
    const notNull = required(f, newPk) && f.default === undefined;
    const checked = fieldChecks(f).length > 0 || unique(f, newPk);
    adds.push({
      type: 'add_column', column: f.name, sql: [alter(`ADD COLUMN ${columnDefinition(f, newPk)}`)], rollback: [alter(`DROP COLUMN ${col(f.name)}`)],
      is_safe: !notNull, ...(notNull ? { unsafe: `Field '${f.name}': a required column without a default cannot be added to rows that exist (it fails while the table has rows)` } : {}),
      cost: f.default !== undefined && checked ? 'scan' : 'metadata', warnings: [`A rollback drops column '${f.name}' with the values written to it.`],
    });
  }

  // Columns kept: type, checks, uniqueness, nullability, default.
  for (const [o, n] of a.pairs) {
    const c = n.name;
    const oldType = columnType(o), newType = columnType(n);
    const retyped = oldType !== newType;
    const oldChecks = fieldChecks(renamed(o, c)), newChecks = fieldChecks(n);
    if (retyped || !same(oldChecks, newChecks)) {
      // The checks as the database holds them (names given by PostgreSQL at creation or by an
      // earlier migration) go; the new schema's are added with names of their own.
      const existing = constraintsOf('c', [o.name]);
      const before = fieldChecks(o);
      if (existing.length || before.length) {
        pre.push({
          type: 'drop_check', column: c, sql: existing.map((k) => alter(`DROP CONSTRAINT ${col(k.name)}`)),
          rollback: before.map((e) => alter(`ADD CONSTRAINT ${named('ck', o.name, e)} CHECK (${e})`)), is_safe: true, cost: 'metadata', warnings: [],
        });
      }
      if (newChecks.length) {
        post.push({
          type: 'add_check', column: c, sql: newChecks.map((e) => alter(`ADD CONSTRAINT ${named('ck', c, e)} CHECK (${e})`)),
          rollback: newChecks.map((e) => alter(`DROP CONSTRAINT ${named('ck', c, e)}`)), is_safe: true, cost: 'scan',
          warnings: [`Every row must satisfy the constraints of '${c}', else the migration fails and changes nothing.`],
        });
      }
    }
    if (!retyped && newType === 'jsonb' && !jsonTypes(o).every((x) => jsonTypes(n).includes(x))) {
      types.push({
        type: 'check_values', column: c,
        sql: [{ sql: `SELECT 1 FROM ${t} WHERE jsonb_typeof(${col(o.name)}) <> ALL (ARRAY(SELECT jsonb_array_elements_text($1::jsonb))) AND jsonb_typeof(${col(o.name)}) <> 'null' LIMIT 1`, params: [JSON.stringify(jsonTypes(n))], expectNone: `Field '${c}': some rows hold values that are not of type ${n.type}.` }],
        rollback: [], is_safe: false, unsafe: `Field '${c}': changing its type from ${o.type} to ${n.type} (rows whose values do not fit fail the migration)`, cost: 'scan', warnings: [],
      });
    }
    if (retyped) {
      const change = typeChange(oldType, newType);
      const oldDefault = defaultSql(o);
      if (oldDefault !== undefined) pre.push({ type: 'drop_default', column: c, sql: [alter(`ALTER COLUMN ${col(o.name)} DROP DEFAULT`)], rollback: [alter(`ALTER COLUMN ${col(o.name)} SET DEFAULT ${oldDefault}`)], is_safe: true, cost: 'metadata', warnings: [] });
      types.push({
        type: 'alter_column_type', column: c,
        sql: [alter(`ALTER COLUMN ${col(c)} TYPE ${newType} USING ${converted(col(c), oldType, newType)}`)],
        rollback: [alter(`ALTER COLUMN ${col(c)} TYPE ${oldType} USING ${converted(col(c), newType, oldType)}`)],
        is_safe: change === 'widen',
        ...(change === 'widen' ? {} : { unsafe: `Field '${c}': ${change === 'narrow' ? 'narrowing' : 'an incompatible change of'} its type from ${o.type} (${oldType}) to ${n.type} (${newType}); values that do not convert fail the migration` }),
        cost: 'rewrite',
        warnings: change === 'widen'
          ? [`A rollback converts '${c}' back to ${oldType}; it fails if a value written since does not convert.`, ...(newType === 'double precision' ? [`Integers beyond 2^53 lose precision as ${newType}.`] : [])]
          : [`A rollback cannot restore values that the conversion changed.`],
      });
      const newDefault = defaultSql(n);
      if (newDefault !== undefined) nulls.push({ type: 'set_default', column: c, sql: [alter(`ALTER COLUMN ${col(c)} SET DEFAULT ${newDefault}`)], rollback: [alter(`ALTER COLUMN ${col(c)} DROP DEFAULT`)], is_safe: true, cost: 'metadata', warnings: [] });
    } else {
      const before = defaultSql(o), after = defaultSql(n);
      if (before !== after) {
        const set = (d: string | undefined) => alter(`ALTER COLUMN ${col(c)} ${d === undefined ? 'DROP DEFAULT' : `SET DEFAULT ${d}`}`);
        nulls.push({ type: after === undefined ? 'drop_default' : 'set_default', column: c, sql: [set(after)], rollback: [set(before)], is_safe: true, cost: 'metadata', warnings: [] });
      }
    }
    const wasNotNull = required(o, oldPk), notNull = required(n, newPk);
    if (wasNotNull !== notNull) {
      const set = (on: boolean) => alter(`ALTER COLUMN ${col(c)} ${on ? 'SET' : 'DROP'} NOT NULL`);
      nulls.push(notNull
        ? { type: 'set_not_null', column: c, sql: [set(true)], rollback: [set(false)], is_safe: false, unsafe: `Field '${c}': making it required (NOT NULL) fails while a row holds no value`, cost: 'scan', warnings: [] }
        : { type: 'drop_not_null', column: c, sql: [set(false)], rollback: [set(true)], is_safe: true, cost: 'metadata', warnings: ['A rollback makes the column NOT NULL again; it fails if a row written since holds no value.'] });
    }
    const wasUnique = unique(o, oldPk), isUnique = unique(n, newPk);
    if (wasUnique !== isUnique) {
      const name = named('uq', c, 'unique');
      if (isUnique) {
        post.push({
          type: 'add_unique', column: c, sql: [alter(`ADD CONSTRAINT ${name} UNIQUE (${col(c)})`)], rollback: [alter(`DROP CONSTRAINT ${name}`)], is_safe: true, cost: 'scan',
          warnings: [`The values of '${c}' must be unique already, else the migration fails and changes nothing.`],
        });
      } else {
        pre.push({
          type: 'drop_unique', column: c, sql: constraintsOf('u', [o.name]).map((k) => alter(`DROP CONSTRAINT ${col(k.name)}`)),
          rollback: [alter(`ADD CONSTRAINT ${named('uq', o.name, 'unique')} UNIQUE (${col(o.name)})`)], is_safe: true, cost: 'metadata',
          warnings: ['A rollback makes the column unique again; it fails if duplicates were written since.'],
        });
      }
    }
  }

  // Foreign keys: by content (fields, target, onDelete), old ones seen through the renames.
  const ddl = { schema: input.schema, table, resolveTable: (r: string) => input.resolveTable(r) ?? r };
  const oldFks = foreignKeysOf(old), newFks = foreignKeysOf(stored);
  const key = (fk: ForeignKey) => JSON.stringify([fk.fields, fk.reference.resource, fk.reference.fields, fk['x-actions']?.onDelete ?? 'RESTRICT']);
  const mapped = (fk: ForeignKey): ForeignKey => ({ ...fk, fields: fk.fields.map(newName), reference: fk.reference.resource === '' ? { ...fk.reference, fields: fk.reference.fields.map(newName) } : fk.reference });
  const newKeys = new Set(newFks.map(key));
  const oldKeys = new Set(oldFks.map((fk) => key(mapped(fk))));
  const usedFk = new Set<string>();
  for (const fk of oldFks) {
    if (newKeys.has(key(mapped(fk)))) continue;
    const existing = constraintsOf('f', fk.fields).find((k) => !usedFk.has(k.name));
    if (existing) usedFk.add(existing.name);
    pre.push({
      type: 'drop_foreign_key', column: fk.fields.join(', '), sql: existing ? [alter(`DROP CONSTRAINT ${col(existing.name)}`)] : [],
      rollback: [alter(`ADD CONSTRAINT ${ownName(table, `fk_${hash8(key(fk))}`)} ${foreignKeySql(fk, ddl)}`)], is_safe: true, cost: 'metadata',
      warnings: ['A rollback adds the foreign key again; it fails if a row written since has no matching target.'],
    });
  }
  for (const fk of newFks) {
    if (oldKeys.has(key(fk))) continue;
    if (input.resolveTable(fk.reference.resource) === undefined) {
      errors.push(`foreignKeys (${fk.fields.join(', ')} → ${fk.reference.resource}): the referenced table "${fk.reference.resource}" is not materialized; materialize it first.`);
      continue;
    }
    const name = ownName(table, `fk_${hash8(key(fk))}`);
    post.push({
      type: 'add_foreign_key', column: fk.fields.join(', '), sql: [alter(`ADD CONSTRAINT ${name} ${foreignKeySql(fk, ddl)}`)], rollback: [alter(`DROP CONSTRAINT ${name}`)],
      is_safe: true, cost: 'scan', warnings: [`Every row's ${fk.fields.join(', ')} must match a row of ${fk.reference.resource || 'this table'}, else the migration fails and changes nothing.`],
    });
  }

  // Declared indexes: by name; an old one seen through the renames.
  const mappedIndex = (ix: IndexDef): IndexDef => (ix.fields ? { ...ix, fields: ix.fields.map(newName) } : ix);
  const oldIx = new Map((old.indexes ?? []).map((ix) => [ix.name, ix]));
  const newIx = new Map((stored.indexes ?? []).map((ix) => [ix.name, ix]));
  const o = { schema: input.schema, table };
  const dropIndex = (name: string) => s(`DROP INDEX IF EXISTS ${quotedSchema(input.schema)}.${ownName(table, name)}`);
  for (const [name, ix] of oldIx) {
    const now = newIx.get(name);
    if (now && same(mappedIndex(ix), now)) continue;
    pre.push({ type: 'drop_index', column: name, sql: [dropIndex(name)], rollback: indexDdl(old, ix, o).map(s), is_safe: true, cost: 'metadata', warnings: [] });
  }
  for (const [name, ix] of newIx) {
    const was = oldIx.get(name);
    if (was && same(mappedIndex(was), ix)) continue;
    post.push({ type: 'add_index', column: name, sql: indexDdl(stored, ix, o).map(s), rollback: [dropIndex(name)], is_safe: true, cost: 'scan', warnings: [] });
  }

  // The keyword search index covers the text columns: it follows when they change.
  const before = searchVector('flat_table', old, (n) => col(newName(n)));
  const after = searchVector('flat_table', stored, col);
  if (before !== after) {
    // Dropped first: its expression names the text columns, which a type change may take away.
    const create = (v: string | undefined) => (v === undefined ? [] : [s(`CREATE INDEX ${ownName(table, '_search')} ON ${t} USING gin (${v})`)]);
    const drop = s(`DROP INDEX IF EXISTS ${quotedSchema(input.schema)}.${ownName(table, '_search')}`);
    pre.unshift({ type: 'drop_search_index', sql: [drop], rollback: create(searchVector('flat_table', old, col)), is_safe: true, cost: 'metadata', warnings: [] });
    if (after !== undefined) {
      post.push({
        type: 'create_search_index', sql: create(after), rollback: [drop], is_safe: true, cost: 'scan',
        warnings: ['The keyword search index covers the table\'s text fields: it is rebuilt (time grows with the rows).'],
      });
    }
  }
  return [...pre, ...drops, ...renameSteps, ...adds, ...types, ...nulls, ...post];
}

/** Renames in an order where no target name is still taken; a cycle (a ↔ b) is an error. */
function orderRenames(renames: [string, string][], errors: string[]): [string, string][] {
  const out: [string, string][] = [];
  let left = [...renames];
  while (left.length) {
    const ready = left.filter(([, to]) => !left.some(([from]) => from === to));
    if (!ready.length) {
      errors.push(`Renames ${left.map(([f, t]) => `${f} → ${t}`).join(', ')} form a cycle; rename through a temporary name in two migrations.`);
      return out;
    }
    out.push(...ready);
    left = left.filter((r) => !ready.includes(r));
  }
  return out;
}

interface DocumentArgs {
  input: PlanInput;
  t: string;
  pairs: [Field, Field][];
  added: Field[];
  dropped: Field[];
  stored: TableSchema;
  newPk: string[];
}

/**
 * jsonb and docstore tables keep records as documents: a change rewrites the documents that
 * need it (rename a key, fill a default, drop a key, turn values into strings) or checks that
 * every document already fits (a narrower type, a required field).
 */
function documentSteps(a: DocumentArgs): Step[] {
  const { input, t, newPk } = a;
  const docCol = input.provider === 'jsonb' ? 'data' : 'doc';
  const oldPk = primaryKeyOf(input.old);
  const steps: Step[] = [];
  const update = (set: string, where: string, params: unknown[]): Statement => ({ sql: `UPDATE ${t} SET ${docCol} = ${set} WHERE ${where}`, params });
  const uniqueIndex = (f: string) => ownName(input.table, `_u_${f}`);
  const canUnique = input.provider === 'jsonb';
  const uniqueSql = (f: string): Statement => s(`CREATE UNIQUE INDEX ${uniqueIndex(f)} ON ${t} ((${docCol} ->> '${f}'))`);
  const dropUnique = (f: string): Statement => s(`DROP INDEX IF EXISTS ${quotedSchema(input.schema)}.${uniqueIndex(f)}`);
  for (const f of a.dropped) {
    steps.push({
      type: 'drop_key', column: f.name, sql: [update(`${docCol} - $1::text`, `(${docCol} -> $1::text) IS NOT NULL`, [f.name]), ...(canUnique && unique(f, oldPk) ? [dropUnique(f.name)] : [])],
      rollback: canUnique && unique(f, oldPk) ? [uniqueSql(f.name)] : [], is_safe: true, cost: 'rewrite', warnings: [`The key '${f.name}' is removed from every document; a rollback does not restore its values.`],
    });
  }
  for (const [o, n] of a.pairs) {
    const c = n.name;
    const wasUnique = canUnique && unique(o, oldPk), isUnique = canUnique && unique(n, newPk);
    if (wasUnique && (!isUnique || o.name !== c)) steps.push({ type: 'drop_unique', column: o.name, sql: [dropUnique(o.name)], rollback: [uniqueSql(o.name)], is_safe: true, cost: 'metadata', warnings: [] });
    if (o.name !== c) {
      const move = (from: string, to: string) => update(`(${docCol} - $1::text) || jsonb_build_object($2::text, ${docCol} -> $1::text)`, `(${docCol} -> $1::text) IS NOT NULL`, [from, to]);
      steps.push({ type: 'rename_key', column: c, sql: [move(o.name, c)], rollback: [move(c, o.name)], is_safe: true, cost: 'rewrite', warnings: [] });
    }
    if (isUnique && (!wasUnique || o.name !== c)) {
      steps.push({ type: 'add_unique', column: c, sql: [uniqueSql(c)], rollback: [dropUnique(c)], is_safe: true, cost: 'scan', warnings: [`The values of '${c}' must be unique already, else the migration fails and changes nothing.`] });
    }
    const was = jsonTypes(o), now = jsonTypes(n);
    if (!was.every((x) => now.includes(x))) {
      if (same(now, ['string'])) {
        steps.push({
          type: 'convert_values', column: c, sql: [update(`jsonb_set(${docCol}, ARRAY[$1::text], to_jsonb(${docCol} ->> $1::text))`, `jsonb_typeof(${docCol} -> $1::text) NOT IN ('string', 'null')`, [c])],
          rollback: [], is_safe: true, cost: 'rewrite', warnings: [`Values of '${c}' become strings; a rollback does not turn them back.`],
        });
      } else {
        steps.push({
          type: 'check_values', column: c,
          sql: [{ sql: `SELECT 1 FROM ${t} WHERE jsonb_typeof(${docCol} -> $1::text) <> ALL (ARRAY(SELECT jsonb_array_elements_text($2::jsonb))) AND jsonb_typeof(${docCol} -> $1::text) <> 'null' LIMIT 1`, params: [c, JSON.stringify(now)], expectNone: `Field '${c}': some documents hold values that are not of type ${n.type}.` }],
          rollback: [], is_safe: false, unsafe: `Field '${c}': changing its type from ${o.type} to ${n.type} (documents whose values do not fit fail the migration)`, cost: 'scan', warnings: [],
        });
      }
    }
    if (!required(o, oldPk) && required(n, newPk)) {
      steps.push({
        type: 'check_required', column: c,
        sql: [{ sql: `SELECT 1 FROM ${t} WHERE coalesce(jsonb_typeof(${docCol} -> $1::text), 'null') = 'null' LIMIT 1`, params: [c], expectNone: `Field '${c}': some documents hold no value.` }],
        rollback: [], is_safe: false, unsafe: `Field '${c}': making it required (documents without a value fail the migration)`, cost: 'scan', warnings: [],
      });
    }
    if (o.default === undefined && n.default !== undefined) steps.push(fillDefault(n));
  }
  for (const f of a.added) {
    if (f.default !== undefined) steps.push(fillDefault(f));
    else if (required(f, newPk)) {
      steps.push({
        type: 'check_required', column: f.name,
        sql: [{ sql: `SELECT 1 FROM ${t} WHERE coalesce(jsonb_typeof(${docCol} -> $1::text), 'null') = 'null' LIMIT 1`, params: [f.name], expectNone: `Field '${f.name}': some documents hold no value.` }],
        rollback: [], is_safe: false, unsafe: `Field '${f.name}': a required field without a default (documents without a value fail the migration)`, cost: 'scan', warnings: [],
      });
    }
    if (canUnique && unique(f, newPk)) steps.push({ type: 'add_unique', column: f.name, sql: [uniqueSql(f.name)], rollback: [dropUnique(f.name)], is_safe: true, cost: 'scan', warnings: [] });
  }
  return steps;

  function fillDefault(f: Field): Step {
    return {
      type: 'fill_default', column: f.name, sql: [update(`${docCol} || jsonb_build_object($1::text, $2::jsonb)`, `(${docCol} -> $1::text) IS NULL`, [f.name, JSON.stringify(f.default)])],
      rollback: [], is_safe: true, cost: 'rewrite', warnings: [`Documents without '${f.name}' get its default; a rollback leaves the key in them.`],
    };
  }
}

/** Milliseconds a plan may take on `rows` rows (rough: measured on the bench, docs/migrations.md). */
export function estimatedMs(steps: Step[], rows: number): number {
  const perRow: Record<Cost, number> = { metadata: 0, scan: 0.0005, rewrite: 0.003 };
  return Math.ceil(steps.reduce((ms, st) => ms + 2 + perRow[st.cost] * rows * Math.max(1, st.sql.length), 0));
}
