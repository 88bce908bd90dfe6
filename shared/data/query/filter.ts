// The filter tree of the records API (docs/data-tables.md "Records API"): a small expression
// tree over record fields, the shape Cerbos query plans (CERBOS-NOTES §6) compile into, and
// its compilation to a parameterised WHERE fragment. Field names come only from the table's
// stored schema and are quoted; every value is coerced to the field's type and bound (`?`).
import { likeEscape } from '../../common/filters.ts';
import { quoteIdent } from '../../db/sql.ts';
import { fieldError } from '../../errors.ts';
import { columnType } from '../ddl.ts';
import { GENERATED_KEY, declaredKey, type TableSchema } from '../table-schema.ts';

export type CompareOp = 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge';
export type TextOp = 'contains' | 'icontains' | 'startswith' | 'istartswith' | 'endswith' | 'iendswith';
export type Filter =
  | { op: 'and' | 'or'; args: Filter[] }
  | { op: 'not'; arg: Filter }
  | { op: CompareOp; field: string; value: unknown }
  | { op: 'in' | 'nin'; field: string; values: unknown[] }
  | { op: TextOp; field: string; value: unknown }
  | { op: 'isnull'; field: string; value: boolean }
  | { op: 'between'; field: string; low: unknown; high: unknown };

export interface ColumnInfo {
  /** The field's column name (quoted on use when `sql` is absent). */
  column: string;
  /** Its PostgreSQL type, as columnType() gives it. */
  pgType: string;
  /** The SQL expression of the value when it is not the bare column (qualified, JSON paths). */
  sql?: string;
  /** Conditions on a related table's field: the compiled condition wrapped (an EXISTS), with the wrapper's own values after the condition's. */
  wrap?: (condition: string) => SqlFragment;
  /** A document path outside the schema (text): its numeric reading for ordered comparisons. */
  numeric?: ColumnInfo;
}
/** Field name → column; a Map of the table's columns, or a resolver of paths as well. */
export interface Columns {
  get(field: string): ColumnInfo | undefined;
}

export interface SqlFragment {
  sql: string;
  params: unknown[];
}

/** Query-string parameters of the records API that are never field conditions. */
export const RESERVED_PARAMS = new Set([
  'page', 'page_size', 'limit', 'offset', '_sort', '_count', 'populate', '_aggregate', '_group_by', 'search', 'format', 'filter', 'ids', 'unique_fields',
]);

const MAX_DEPTH = 32;
const MAX_NODES = 1000;
const SQL_OPS: Record<CompareOp, string> = { eq: '=', ne: 'IS DISTINCT FROM', lt: '<', le: '<=', gt: '>', ge: '>=' };
const TEXT_OPS = new Set<string>(['contains', 'icontains', 'startswith', 'istartswith', 'endswith', 'iendswith']);
const TEXT_TYPES = new Set(['text']);
const ORDERED_TYPES = new Set(['text', 'uuid', 'bigint', 'integer', 'double precision', 'date', 'time', 'timestamptz', 'interval']);

/** The columns of a flat_table table: each schema field, plus the generated `id` when no key is declared. */
export function columnsOf(schema: TableSchema, alias?: string): Map<string, ColumnInfo> {
  const out = new Map<string, ColumnInfo>();
  const col = (name: string, pgType: string): ColumnInfo => (alias ? { column: name, pgType, sql: `${alias}.${quoteIdent(name)}` } : { column: name, pgType });
  if (!declaredKey(schema)) out.set(GENERATED_KEY, col(GENERATED_KEY, 'uuid'));
  for (const f of schema.fields) out.set(f.name, col(f.name, columnType(f)));
  return out;
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DATE_RE = /^\d{4}-\d{2}-\d{2}$/;
const TIME_RE = /^\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$/;
const DATETIME_RE = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$/;
const INTERVAL_RE = /^[A-Za-z0-9 .:+-]{1,100}$/;

/** A value coerced to a column's type for binding; 400 naming the field when it does not fit. */
export function coerceValue(field: string, info: ColumnInfo, value: unknown): unknown {
  const bad = (what: string): never => {
    throw fieldError(field, `Invalid value ${JSON.stringify(value)}: expected ${what}.`);
  };
  if (value === null) return null;
  if (typeof value === 'string' && value.includes('\0')) bad('a value without NUL characters');
  switch (info.pgType) {
    case 'bigint':
    case 'integer': {
      const n = typeof value === 'number' ? value : typeof value === 'string' && /^-?\d{1,18}$/.test(value.trim()) ? Number(value) : NaN;
      if (!Number.isSafeInteger(n)) bad('an integer');
      return n;
    }
    case 'double precision': {
      const n = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
      if (!Number.isFinite(n)) bad('a number');
      return n;
    }
    case 'boolean':
      if (typeof value === 'boolean') return value;
      if (value === 'true' || value === '1') return true;
      if (value === 'false' || value === '0') return false;
      return bad('true or false');
    case 'uuid':
      if (typeof value !== 'string' || !UUID_RE.test(value)) bad('a UUID');
      return value;
    case 'date':
      if (typeof value !== 'string' || !DATE_RE.test(value) || Number.isNaN(Date.parse(value))) bad('a date (YYYY-MM-DD)');
      return value;
    case 'time':
      if (typeof value !== 'string' || !TIME_RE.test(value)) bad('a time (HH:MM[:SS])');
      return value;
    case 'timestamptz':
      if (typeof value !== 'string' || !DATETIME_RE.test(value) || Number.isNaN(Date.parse(value))) bad('an ISO 8601 date-time');
      return value;
    case 'interval':
      if (typeof value !== 'string' || !INTERVAL_RE.test(value)) bad('a duration');
      return value;
    case 'jsonb':
      return JSON.stringify(value);
    default: // text
      if (typeof value === 'string') return value;
      if (typeof value === 'number' || typeof value === 'boolean') return String(value);
      return bad('a string');
  }
}

/** Compiles a filter tree to a WHERE fragment with `?` placeholders; 400 naming the field on a bad field or value. */
export function compileFilter(tree: Filter, columns: Columns): SqlFragment {
  const params: unknown[] = [];
  let nodes = 0;
  const bind = (info: ColumnInfo, v: unknown) => {
    params.push(v);
    return `?::${info.pgType}`;
  };
  const walk = (node: Filter, depth: number): string => {
    if (++nodes > MAX_NODES || depth > MAX_DEPTH) throw fieldError('filter', `The filter is too large (at most ${MAX_NODES} conditions, nested ${MAX_DEPTH} deep).`);
    if (typeof node !== 'object' || node === null) throw fieldError('filter', 'Each condition must be an object.');
    switch (node.op) {
      case 'and':
      case 'or': {
        if (!Array.isArray(node.args)) throw fieldError('filter', `"${node.op}" needs an array of conditions.`);
        if (!node.args.length) return node.op === 'and' ? 'TRUE' : 'FALSE';
        return `(${node.args.map((a) => walk(a, depth + 1)).join(node.op === 'and' ? ' AND ' : ' OR ')})`;
      }
      case 'not':
        return `(NOT ${walk(node.arg, depth + 1)})`;
      default:
        break;
    }
    const field = (node as { field?: unknown }).field;
    if (typeof field !== 'string') throw fieldError('filter', `Condition "${String(node.op)}" needs a field.`);
    const found = columns.get(field);
    if (!found) throw fieldError(field, `Unknown field "${field}".`);
    const sql = leaf(node, field, pick(found, node));
    if (!found.wrap) return sql;
    const wrapped = found.wrap(sql);
    params.push(...wrapped.params);
    return wrapped.sql;
  };
  const leaf = (node: Filter, field: string, info: ColumnInfo): string => {
    const col = info.sql ?? quoteIdent(info.column);
    const value = (v: unknown) => {
      if (v === null || v === undefined) throw fieldError(field, `A value is required for "${node.op}" (use isnull for NULL).`);
      return bind(info, coerceValue(field, info, v));
    };
    const ordered = () => {
      if (!ORDERED_TYPES.has(info.pgType)) throw fieldError(field, `Operator "${node.op}" does not apply to a ${info.pgType} field.`);
    };
    switch (node.op) {
      case 'eq':
      case 'ne':
        return `${col} ${SQL_OPS[node.op]} ${value(node.value)}`;
      case 'lt':
      case 'le':
      case 'gt':
      case 'ge':
        ordered();
        return `${col} ${SQL_OPS[node.op]} ${value(node.value)}`;
      case 'in':
      case 'nin': {
        if (!Array.isArray(node.values) || !node.values.length) throw fieldError(field, `"${node.op}" needs a non-empty list of values.`);
        if (node.values.length > 1000) throw fieldError(field, `"${node.op}" takes at most 1000 values.`);
        const list = node.values.map(value).join(', ');
        return node.op === 'in' ? `${col} IN (${list})` : `(${col} IS NULL OR ${col} NOT IN (${list}))`;
      }
      case 'isnull':
        if (typeof node.value !== 'boolean') throw fieldError(field, '"isnull" takes true or false.');
        return `${col} IS ${node.value ? '' : 'NOT '}NULL`;
      case 'between':
        ordered();
        return `${col} BETWEEN ${value(node.low)} AND ${value(node.high)}`;
      default:
        break;
    }
    if (TEXT_OPS.has(node.op)) {
      if (!TEXT_TYPES.has(info.pgType)) throw fieldError(field, `Operator "${node.op}" applies to text fields only.`);
      const v = (node as { value: unknown }).value;
      if (typeof v !== 'string' && typeof v !== 'number') throw fieldError(field, `"${node.op}" needs a text value.`);
      const text = likeEscape(String(coerceValue(field, info, String(v))));
      const base = node.op.replace(/^i/, '');
      params.push(base === 'contains' ? `%${text}%` : base === 'startswith' ? `${text}%` : `%${text}`);
      return `${col} ${node.op.startsWith('i') ? 'ILIKE' : 'LIKE'} ? ESCAPE '\\'`;
    }
    throw fieldError(field, `Unknown operator "${String(node.op)}".`);
  };
  return { sql: walk(tree, 0), params };
}

const isNumeric = (v: unknown) => typeof v === 'number' || (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)));

/** A document path compares as a number when every value of an ordered comparison is one. */
function pick(info: ColumnInfo, node: Filter): ColumnInfo {
  if (!info.numeric) return info;
  const n = node as { op: string; value?: unknown; low?: unknown; high?: unknown };
  if (['lt', 'le', 'gt', 'ge'].includes(n.op) && isNumeric(n.value)) return info.numeric;
  if (n.op === 'between' && isNumeric(n.low) && isNumeric(n.high)) return info.numeric;
  return info;
}

/** Query-string operator suffixes → tree operators. */
const SUFFIX_OPS: Record<string, string> = {
  eq: 'eq', ne: 'ne', gt: 'gt', gte: 'ge', lt: 'lt', lte: 'le', in: 'in', nin: 'nin',
  contains: 'contains', icontains: 'icontains', startswith: 'startswith', istartswith: 'istartswith', endswith: 'endswith', iendswith: 'iendswith',
  isnull: 'isnull', between: 'between',
};

const listOf = (field: string, v: unknown): unknown[] => {
  if (Array.isArray(v)) return v;
  if (typeof v === 'string') return v.split(',');
  if (typeof v === 'number' || typeof v === 'boolean') return [v];
  throw fieldError(field, 'Expected a comma-separated list.');
};

/** One `field` or `field__op` condition. */
function condition(key: string, raw: unknown, fields: Columns): Filter {
  let field = key;
  let suffix = 'eq';
  const exact = fields.get(key);
  const cut = key.lastIndexOf('__');
  // A free document path (`stats.visits__gt`) reads a known operator suffix as the operator.
  const free = exact?.numeric !== undefined && cut > 0 && Object.hasOwn(SUFFIX_OPS, key.slice(cut + 2)) && fields.get(key.slice(0, cut)) !== undefined;
  if (!exact || free) {
    if (cut <= 0 || !fields.get(key.slice(0, cut))) throw fieldError(key, `Unknown field "${key}".`);
    field = key.slice(0, cut);
    suffix = key.slice(cut + 2);
    if (!Object.hasOwn(SUFFIX_OPS, suffix)) throw fieldError(key, `Unknown operator "${suffix}" (allowed: ${Object.keys(SUFFIX_OPS).join(', ')}).`);
  }
  const op = SUFFIX_OPS[suffix]!;
  switch (op) {
    case 'in':
    case 'nin':
      return { op, field, values: listOf(key, raw) };
    case 'isnull':
      if (raw === true || raw === 'true') return { op, field, value: true };
      if (raw === false || raw === 'false') return { op, field, value: false };
      throw fieldError(key, '"isnull" takes true or false.');
    case 'between': {
      const pair = listOf(key, raw);
      if (pair.length !== 2) throw fieldError(key, '"between" takes two values: low,high.');
      return { op, field, low: pair[0], high: pair[1] };
    }
    default:
      if (raw !== null && typeof raw === 'object') throw fieldError(key, 'Expected a single value.');
      return { op, field, value: raw } as Filter;
  }
}

/**
 * `field=value` and `field__op=value` conditions (a repeated parameter: each one) → an AND
 * tree. With `reserved` (the query string), the records API's own parameters are skipped.
 */
export function parseQueryFilters(query: Record<string, unknown>, columns: TableSchema | Columns, reserved = true): Filter {
  const fields = 'fields' in columns ? columnsOf(columns) : columns;
  const args: Filter[] = [];
  for (const [key, raw] of Object.entries(query)) {
    if (reserved && RESERVED_PARAMS.has(key)) continue;
    const values = reserved && Array.isArray(raw) ? raw : [raw];
    for (const v of values) args.push(condition(key, v, fields));
  }
  return { op: 'and', args };
}
