// Frictionless Table Schema (spec Part 2 §2) as this platform accepts it: validation that
// returns EVERY problem as a message, the canonical form (stable key order) and its hash,
// and the derived facts (field names, primary key). See docs/data-tables.md for the choices.
import { createHash } from 'node:crypto';
import { canonical, canonicalJson } from '../common/canonical.ts';
import { patternProblem } from '../common/linear-regexp.ts';
import { compileFragment } from './index-expression.ts';
import { TYPE_FORMATS, TYPE_PROPERTIES, valueProblem } from './field-types.ts';
import { checkGraph } from './graph/schema.ts';

export const IDENT_RE = /^[a-z_][a-z0-9_]{0,62}$/;

export const FIELD_TYPES = [
  'string', 'number', 'integer', 'boolean', 'object', 'array', 'date', 'time', 'datetime',
  'year', 'yearmonth', 'duration', 'geopoint', 'geojson', 'any',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];
export const STRING_FORMATS = ['default', 'email', 'uri', 'binary', 'uuid'] as const;
export const ON_DELETE = ['RESTRICT', 'CASCADE', 'SET NULL', 'SET DEFAULT', 'NO ACTION'] as const;
export type OnDelete = (typeof ON_DELETE)[number];
export const INDEX_METHODS = ['btree', 'hash', 'gin', 'gist', 'brin'] as const;

/** A Frictionless pattern (XML Schema regular expression: the whole value must match) as a JSON Schema / PostgreSQL one. */
export const anchored = (pattern: string): string => `^(?:${pattern})$`;

/** The generated key column of a schema that declares no primaryKey. */
export const GENERATED_KEY = 'id';

export interface Constraints {
  required?: boolean;
  unique?: boolean;
  minimum?: number | string;
  maximum?: number | string;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  enum?: unknown[];
}
export interface Field {
  name: string;
  type: FieldType;
  format?: string;
  title?: string;
  description?: string;
  constraints?: Constraints;
  default?: unknown;
  example?: unknown;
  rdfType?: string;
  'x-rename-from'?: string;
  /** number: how a number written as text (a CSV cell, a JSON string) reads (docs/data-tables.md "Field types"); one character each. */
  decimalChar?: string;
  groupChar?: string;
  /** number, integer: false strips non-numeric characters around a number written as text. */
  bareNumber?: boolean;
  /** boolean: the texts that read as true / false (defaults TRUE_VALUES / FALSE_VALUES). */
  trueValues?: string[];
  falseValues?: string[];
}
export interface ForeignKey {
  fields: string[];
  reference: { resource: string; fields: string[] };
  'x-actions'?: { onDelete?: OnDelete };
}
export interface IndexDef {
  name: string;
  fields?: string[];
  expression?: string;
  unique?: boolean;
  method?: (typeof INDEX_METHODS)[number];
  where?: string;
  comment?: string;
}
export interface TableSchema {
  fields: Field[];
  primaryKey?: string | string[];
  foreignKeys?: ForeignKey[];
  indexes?: IndexDef[];
  title?: string;
  description?: string;
  hierarchy?: boolean;
  graph?: Record<string, unknown>;
  /** The texts that stand for a missing value (null) in every field (Frictionless default `[""]`). */
  missingValues?: string[];
}

const TYPED_KEYS = [...new Set(Object.values(TYPE_PROPERTIES).flat())];
const FIELD_KEYS = ['name', 'type', 'format', 'title', 'description', 'constraints', 'default', 'example', 'rdfType', 'x-rename-from', ...TYPED_KEYS];
const CONSTRAINT_KEYS = ['required', 'unique', 'minimum', 'maximum', 'minLength', 'maxLength', 'pattern', 'enum'];
const TOP_KEYS = ['fields', 'primaryKey', 'foreignKeys', 'indexes', 'title', 'description', 'hierarchy', 'graph', 'missingValues'];
const INDEX_KEYS = ['name', 'fields', 'expression', 'unique', 'method', 'where', 'comment'];

/** Field names that would shadow members of every JavaScript object (`__proto__`, `constructor`). */
const OBJECT_MEMBERS = new Set(Object.getOwnPropertyNames(Object.prototype).filter((n) => IDENT_RE.test(n)));
/** Index names materialization gives its own indexes and constraints (ddl.ts: `{physical}_{name}`). */
const RESERVED_INDEX = /^(?:pkey|fk\d+|_search|data_gin|doc_gin|_u_.*)$/;
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStrArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const asList = (v: unknown): unknown => (typeof v === 'string' ? [v] : v);
const show = (v: unknown) => JSON.stringify(v);
/** One character (a code point: `’` and a narrow no-break space are one). */
const isChar = (v: unknown) => typeof v === 'string' && [...v].length === 1;
const isTextList = (v: unknown) => isStrArray(v) && v.length > 0;
/** The type properties' values (TYPE_PROPERTIES). */
const PROPERTY_CHECKS: Record<string, { ok: (v: unknown) => boolean; what: string }> = {
  decimalChar: { ok: isChar, what: 'a single character' },
  groupChar: { ok: isChar, what: 'a single character' },
  bareNumber: { ok: (v) => typeof v === 'boolean', what: 'a boolean' },
  trueValues: { ok: isTextList, what: 'a non-empty array of strings' },
  falseValues: { ok: isTextList, what: 'a non-empty array of strings' },
};

function checkField(raw: unknown, i: number, errors: string[]): void {
  if (!isObj(raw)) { errors.push(`fields[${i}]: must be an object.`); return; }
  const label = typeof raw.name === 'string' ? `Field '${raw.name}'` : `fields[${i}]`;
  if (typeof raw.name !== 'string' || !IDENT_RE.test(raw.name)) {
    errors.push(`${label}: name ${show(raw.name)} must match ^[a-z_][a-z0-9_]{0,62}$ (lower-case letters, digits, _).`);
  }
  if (typeof raw.name === 'string' && OBJECT_MEMBERS.has(raw.name)) errors.push(`${label}: the name is reserved (a member of every JavaScript object).`);
  for (const k of Object.keys(raw)) if (!FIELD_KEYS.includes(k)) errors.push(`${label}: unknown property '${k}'.`);
  // Only a known type is looked up (`constructor` would find a member of every object).
  const type = (FIELD_TYPES as readonly unknown[]).includes(raw.type) ? (raw.type as FieldType) : undefined;
  if (!type) errors.push(`${label}: invalid type ${show(raw.type)}; valid types are ${FIELD_TYPES.join(', ')}.`);
  const errorCount = errors.length;
  if (raw.format !== undefined && type) {
    const formats = type === 'string' ? STRING_FORMATS : TYPE_FORMATS[type];
    if (formats) {
      if (!formats.includes(raw.format as string)) errors.push(`${label}: invalid format ${show(raw.format)} for type ${type}; valid formats are ${formats.join(', ')}.`);
    } else if (raw.format !== 'default') {
      const dates = type === 'date' || type === 'time' || type === 'datetime' ? ' (ISO 8601 values only: "any" and strptime patterns are not supported)' : '';
      errors.push(`${label}: type ${show(type)} takes no format other than 'default'${dates}.`);
    }
  }
  // Values written in the schema (default, enum, minimum…) are values of the field: the DDL writes
  // them as typed literals. Checked once the type and format are known good.
  const valueType = type && errors.length === errorCount ? { type, format: raw.format as string | undefined } : undefined;
  const problem = (v: unknown) => (valueType ? valueProblem(valueType, v) : undefined);
  for (const k of TYPED_KEYS) {
    if (raw[k] === undefined) continue;
    if (!(type && TYPE_PROPERTIES[type]?.includes(k))) errors.push(`${label}: property '${k}' applies to ${Object.keys(TYPE_PROPERTIES).filter((t) => TYPE_PROPERTIES[t]!.includes(k)).join(' and ')} fields only.`);
    else if (!PROPERTY_CHECKS[k]!.ok(raw[k])) errors.push(`${label}: ${k} must be ${PROPERTY_CHECKS[k]!.what}.`);
  }
  if (isStrArray(raw.trueValues) && isStrArray(raw.falseValues) && raw.trueValues.some((v) => (raw.falseValues as string[]).includes(v))) errors.push(`${label}: trueValues and falseValues overlap.`);
  if (raw.groupChar !== undefined && (raw.decimalChar ?? '.') === raw.groupChar) errors.push(`${label}: decimalChar and groupChar must differ.`);
  for (const k of ['title', 'description', 'rdfType'] as const) if (raw[k] !== undefined && typeof raw[k] !== 'string') errors.push(`${label}: ${k} must be a string.`);
  if (raw['x-rename-from'] !== undefined && (typeof raw['x-rename-from'] !== 'string' || !IDENT_RE.test(raw['x-rename-from']))) {
    errors.push(`${label}: x-rename-from must be a field name.`);
  }
  const badDefault = raw.default === undefined ? undefined : problem(raw.default);
  if (badDefault) errors.push(`${label}: default ${badDefault}.`);
  if (raw.constraints === undefined) return;
  const c = raw.constraints;
  if (!isObj(c)) { errors.push(`${label}: constraints must be an object.`); return; }
  for (const k of Object.keys(c)) if (!CONSTRAINT_KEYS.includes(k)) errors.push(`${label}: unknown constraint '${k}'.`);
  for (const k of ['required', 'unique'] as const) if (c[k] !== undefined && typeof c[k] !== 'boolean') errors.push(`${label}: constraint ${k} must be a boolean.`);
  for (const k of ['minLength', 'maxLength'] as const) {
    if (c[k] !== undefined && !(Number.isInteger(c[k]) && (c[k] as number) >= 0)) errors.push(`${label}: constraint ${k} must be a non-negative integer.`);
  }
  // Text and JSON columns compare with any number or string; the others (dates, times, booleans, uuids) with a value of their type.
  const numeric = type === 'integer' || type === 'number' || type === 'year';
  const loose = (type === 'string' && raw.format !== 'uuid') || type === 'object' || type === 'array' || type === 'geopoint' || type === 'geojson' || type === 'any';
  for (const k of ['minimum', 'maximum'] as const) {
    const v = c[k];
    if (v === undefined) continue;
    if (numeric || loose || !type) {
      if (numeric ? typeof v !== 'number' || !Number.isFinite(v) : typeof v !== 'string' && typeof v !== 'number') {
        errors.push(`${label}: constraint ${k} must be a ${numeric ? 'number' : 'number or string'}.`);
      }
    } else {
      const bad = problem(v);
      if (bad) errors.push(`${label}: constraint ${k} ${bad}.`);
    }
  }
  if (c.pattern !== undefined) {
    if (typeof c.pattern !== 'string') errors.push(`${label}: constraint pattern must be a string.`);
    else {
      const problem = patternProblem(c.pattern);
      if (problem) errors.push(`${label}: constraint pattern ${problem}.`);
    }
  }
  if (c.enum !== undefined) {
    if (!Array.isArray(c.enum) || c.enum.length === 0) errors.push(`${label}: constraint enum must be a non-empty array.`);
    else {
      const bad = c.enum.map(problem).find(Boolean);
      if (bad) errors.push(`${label}: constraint enum value ${bad}.`);
    }
  }
}

/** Where a value holds a NUL character: paths like `fields[2].constraints.enum[0]` (`…{key}` for a key). */
function nulPaths(v: unknown, path: string, out: string[]): void {
  if (typeof v === 'string') {
    if (v.includes('\0')) out.push(path);
  } else if (Array.isArray(v)) v.forEach((x, i) => nulPaths(x, `${path}[${i}]`, out));
  else if (isObj(v)) {
    for (const [k, x] of Object.entries(v)) {
      const at = path ? `${path}.${k}` : k;
      if (k.includes('\0')) out.push(`${path || 'the schema'}: the key ${show(k)}`);
      nulPaths(x, at, out);
    }
  }
}

/** NUL characters anywhere (PostgreSQL stores none, in jsonb or text): each place, named by its field when in one. */
function checkNul(doc: Record<string, unknown>, errors: string[]): void {
  const found: string[] = [];
  nulPaths(doc, '', found);
  for (const at of found) {
    const m = /^fields\[(\d+)\]\.?(.*)$/.exec(at);
    const field = m && Array.isArray(doc.fields) ? (doc.fields[Number(m[1])] as Record<string, unknown> | undefined) : undefined;
    const where = m && typeof field?.name === 'string' && !field.name.includes('\0') ? `Field '${field.name}': ${m[2] || 'the field'}` : at;
    errors.push(`${where} must not contain NUL characters.`);
  }
}

/** What the checks of keys and indexes need to know of the fields. */
interface FieldFacts {
  /** The declared field names. */
  names: Set<string>;
  /** The columns: the fields, and the generated key when no primaryKey is declared. */
  columns: Set<string>;
  byName: Map<string, Record<string, unknown>>;
}

/** primaryKey's problems; returns the key's fields (empty when none is declared or it is invalid). */
function checkPrimaryKey(doc: Record<string, unknown>, fields: FieldFacts, errors: string[]): string[] {
  if (doc.primaryKey === undefined) {
    if (fields.names.has(GENERATED_KEY)) {
      errors.push(`Field '${GENERATED_KEY}' is reserved for the generated primary key when no primaryKey is declared; declare primaryKey to use your own '${GENERATED_KEY}'.`);
    }
    return [];
  }
  const list = asList(doc.primaryKey);
  if (!isStrArray(list) || list.length === 0) {
    errors.push('primaryKey must be a field name or a non-empty array of field names.');
    return [];
  }
  for (const n of list) if (!fields.names.has(n)) errors.push(`primaryKey: field '${n}' does not exist.`);
  if (new Set(list).size !== list.length) errors.push('primaryKey lists a field more than once.');
  return list;
}

/** One foreign key's problems: its fields, the referenced table and fields, its onDelete action. */
function checkForeignKey(
  fk: unknown, at: string, fields: FieldFacts, pk: string[], target: { tables: ReadonlyMap<string, readonly string[]>; selfName: string }, errors: string[],
): void {
  if (!isObj(fk)) { errors.push(`${at}: must be an object.`); return; }
  const local = asList(fk.fields);
  if (!isStrArray(local) || local.length === 0) { errors.push(`${at}: fields must be a field name or a non-empty array.`); return; }
  for (const n of local) if (!fields.names.has(n)) errors.push(`${at}: field '${n}' does not exist.`);
  const ref = fk.reference;
  if (!isObj(ref) || typeof ref.resource !== 'string') { errors.push(`${at}: reference {resource, fields} is required.`); return; }
  const remote = asList(ref.fields);
  if (!isStrArray(remote) || remote.length === 0) { errors.push(`${at}: reference.fields must be a field name or a non-empty array.`); return; }
  if (remote.length !== local.length) errors.push(`${at}: ${local.length} local field(s) but ${remote.length} referenced field(s).`);
  const self = ref.resource === '' || ref.resource === target.selfName;
  const columns = self ? [...fields.columns] : target.tables.get(ref.resource);
  if (!columns) errors.push(`${at}: reference.resource '${ref.resource}' is not a table of this app.`);
  else for (const n of remote) if (!columns.includes(n)) errors.push(`${at}: referenced field '${n}' does not exist in '${self ? target.selfName || 'this table' : ref.resource}'.`);
  const actions = fk['x-actions'];
  if (actions === undefined) return;
  if (!isObj(actions)) { errors.push(`${at}: x-actions must be an object.`); return; }
  const od = actions.onDelete;
  if (od === undefined) return;
  if (!(ON_DELETE as readonly unknown[]).includes(od)) errors.push(`${at}: onDelete ${show(od)} is not one of ${ON_DELETE.join(', ')}.`);
  const required = (n: string) => isObj(fields.byName.get(n)?.constraints) && (fields.byName.get(n)!.constraints as Constraints).required === true;
  if (od === 'SET NULL') {
    for (const n of local) if (required(n) || pk.includes(n)) errors.push(`${at}: onDelete SET NULL needs field '${n}' to be nullable (not required, not in the primary key).`);
  }
  if (od === 'SET DEFAULT') {
    for (const n of local) if (fields.byName.get(n)?.default === undefined) errors.push(`${at}: onDelete SET DEFAULT needs field '${n}' to define a default.`);
  }
}

/** One index's problems: name, fields or expression (the grammar of index-expression.ts), options. */
function checkIndex(ix: unknown, i: number, columns: Set<string>, seen: Set<string>, errors: string[]): void {
  const at = isObj(ix) && typeof ix.name === 'string' ? `Index '${ix.name}'` : `indexes[${i}]`;
  if (!isObj(ix)) { errors.push(`${at}: must be an object.`); return; }
  for (const k of Object.keys(ix)) if (!INDEX_KEYS.includes(k)) errors.push(`${at}: unknown property '${k}'.`);
  if (typeof ix.name !== 'string' || !IDENT_RE.test(ix.name)) errors.push(`${at}: name ${show(ix.name)} must match ^[a-z_][a-z0-9_]{0,62}$.`);
  else if (RESERVED_INDEX.test(ix.name)) errors.push(`${at}: the name is reserved for the table's own indexes and constraints (pkey, fk<n>, _search, data_gin, doc_gin, _u_…).`);
  else if (seen.has(ix.name)) errors.push(`${at}: index name is used more than once.`);
  else seen.add(ix.name);
  const hasFields = ix.fields !== undefined;
  if (!hasFields && ix.expression === undefined) errors.push(`${at}: needs fields or expression.`);
  if (hasFields && ix.expression !== undefined) errors.push(`${at}: give fields or expression, not both.`);
  if (hasFields) {
    if (!isStrArray(ix.fields) || ix.fields.length === 0) errors.push(`${at}: fields must be a non-empty array of field names.`);
    else for (const n of ix.fields) if (!columns.has(n)) errors.push(`${at}: field '${n}' does not exist.`);
  }
  for (const k of ['expression', 'where'] as const) {
    if (ix[k] === undefined) continue;
    if (typeof ix[k] !== 'string') { errors.push(`${at}: ${k} must be a string.`); continue; }
    try { compileFragment(ix[k], columns); } catch (err) { errors.push(`${at}: ${k} is not allowed: ${(err as Error).message}.`); }
  }
  if (ix.unique !== undefined && typeof ix.unique !== 'boolean') errors.push(`${at}: unique must be a boolean.`);
  if (ix.method !== undefined && !(INDEX_METHODS as readonly unknown[]).includes(ix.method)) errors.push(`${at}: method ${show(ix.method)} is not one of ${INDEX_METHODS.join(', ')}.`);
  if (ix.comment !== undefined && typeof ix.comment !== 'string') errors.push(`${at}: comment must be a string.`);
}

/**
 * Every problem of a json_schema document, as messages (empty when valid). `tables` are the
 * other tables of the same app (name → field names) for foreign keys; `selfName` is this table.
 */
export function validateTableSchema(doc: unknown, tables: ReadonlyMap<string, readonly string[]> = new Map(), selfName = ''): string[] {
  const errors: string[] = [];
  if (!isObj(doc)) return ['The schema must be an object.'];
  for (const k of Object.keys(doc)) if (!TOP_KEYS.includes(k)) errors.push(`Unknown top-level property '${k}'.`);
  checkNul(doc, errors);
  if (doc.missingValues !== undefined && !isStrArray(doc.missingValues)) errors.push('missingValues must be an array of strings.');
  if (!Array.isArray(doc.fields) || doc.fields.length === 0) return [...errors, "'fields' is required and must be a non-empty array."];
  doc.fields.forEach((f, i) => checkField(f, i, errors));
  const list = doc.fields.map((f) => (isObj(f) && typeof f.name === 'string' ? f.name : ''));
  const names = new Set(list.filter(Boolean));
  const dupes = [...new Set(list.filter((n, i) => n && list.indexOf(n) !== i))];
  for (const d of dupes) errors.push(`Field name '${d}' is used more than once.`);
  const fields: FieldFacts = {
    names,
    columns: new Set([...names, ...(doc.primaryKey === undefined ? [GENERATED_KEY] : [])]),
    byName: new Map(doc.fields.filter(isObj).map((f) => [f.name as string, f])),
  };

  const pk = checkPrimaryKey(doc, fields, errors);
  if (doc.foreignKeys !== undefined) {
    if (!Array.isArray(doc.foreignKeys)) errors.push('foreignKeys must be an array.');
    else doc.foreignKeys.forEach((fk, i) => checkForeignKey(fk, `foreignKeys[${i}]`, fields, pk, { tables, selfName }, errors));
  }
  if (doc.indexes !== undefined) {
    if (!Array.isArray(doc.indexes)) errors.push('indexes must be an array.');
    else {
      const seen = new Set<string>();
      doc.indexes.forEach((ix, i) => checkIndex(ix, i, fields.columns, seen, errors));
    }
  }
  for (const k of ['title', 'description'] as const) if (doc[k] !== undefined && typeof doc[k] !== 'string') errors.push(`${k} must be a string.`);
  checkGraph(doc, fields.columns, pk, errors);
  return errors;
}

/** Same document with object keys sorted at every depth (arrays keep their order): the hash input. */
export const canonicalSchema = canonical;

/** SHA-256 hex of the canonical JSON: key order does not change it. */
export const schemaHash = (doc: unknown): string => createHash('sha256').update(canonicalJson(doc)).digest('hex');

/**
 * Whether a document — any JSON, not validated yet (the json_schema of a PUT or PATCH) — is the
 * schema with this hash, its fields' `x-rename-from` (meaningful only in a change) set aside.
 */
export function hasSchemaHash(doc: unknown, hash: string): boolean {
  const fields = isObj(doc) && Array.isArray(doc.fields) ? doc.fields.map((f) => (isObj(f) ? { ...f, 'x-rename-from': undefined } : f)) : undefined;
  return schemaHash(fields ? { ...(doc as object), fields } : doc) === hash;
}

/** primaryKey as a list (a string is a one-field key); undefined when none is declared. */
export const declaredKey = (s: TableSchema): string[] | undefined => (s.primaryKey === undefined ? undefined : (asList(s.primaryKey) as string[]));

/** The key columns: the declared primaryKey, or the generated `id`. */
export const primaryKeyOf = (s: TableSchema): string[] => declaredKey(s) ?? [GENERATED_KEY];

/** Column names: the generated `id` first when there is no declared key, then the fields. */
export const fieldNamesOf = (s: TableSchema): string[] => [...(declaredKey(s) ? [] : [GENERATED_KEY]), ...s.fields.map((f) => f.name)];

export const foreignKeysOf = (s: TableSchema): ForeignKey[] =>
  (s.foreignKeys ?? []).map((fk) => ({ ...fk, fields: asList(fk.fields) as string[], reference: { ...fk.reference, fields: asList(fk.reference.fields) as string[] } }));
