// The list route's field conditions (query/filter.ts) evaluated on one record in process: a change
// stream decides each event for each subscriber without a query. The same parser and the same
// coercion of the values (a bad field or value is the list's 400); conditions reach the table's
// own fields only (no relation or document paths: those need the database). Text compares by
// code point, case-insensitive operators by lower case (docs/realtime.md).
import { fieldError } from '../errors.ts';
import { coerceValue, parseQueryFilters, type ColumnInfo, type Filter } from '../data/query/filter.ts';
import type { RecordRow } from '../data/records/target.ts';

export type RecordTest = (record: RecordRow) => boolean;

const ORDERED = new Set(['text', 'uuid', 'bigint', 'integer', 'double precision', 'date', 'time', 'timestamptz', 'interval']);
const TEXT_OPS = new Set(['contains', 'icontains', 'startswith', 'istartswith', 'endswith', 'iendswith']);

/** A value of a field in a form that compares as PostgreSQL compares the column. */
function comparable(info: ColumnInfo, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (info.pgType === 'timestamptz' && typeof v === 'string') return Date.parse(v);
  if (info.pgType === 'uuid' && typeof v === 'string') return v.toLowerCase();
  if (info.pgType === 'jsonb') return JSON.stringify(v);
  if (info.pgType === 'text' && typeof v !== 'string') return String(v);
  return v;
}

const compare = (a: unknown, b: unknown): number => ((a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0);

/** The record test of a list query's conditions (`field=value`, `field__op=value`); 400 as the list answers. */
export function recordTest(query: Record<string, unknown>, columns: Map<string, ColumnInfo>): RecordTest {
  const tree = parseQueryFilters(query, columns);
  const walk = (node: Filter): RecordTest => {
    switch (node.op) {
      case 'and':
      case 'or': {
        const parts = node.args.map(walk);
        return node.op === 'and' ? (r) => parts.every((p) => p(r)) : (r) => parts.some((p) => p(r));
      }
      case 'not': {
        const inner = walk(node.arg);
        return (r) => !inner(r);
      }
      default:
        break;
    }
    const info = columns.get(node.field)!;
    const field = node.field;
    const value = (v: unknown) => {
      if (v === null || v === undefined) throw fieldError(field, `A value is required for "${node.op}" (use isnull for NULL).`);
      return comparable(info, coerceValue(field, info, v));
    };
    const ordered = () => {
      if (!ORDERED.has(info.pgType)) throw fieldError(field, `Operator "${node.op}" does not apply to a ${info.pgType} field.`);
    };
    const of = (r: RecordRow) => comparable(info, r[field]);
    switch (node.op) {
      case 'eq': {
        const v = value(node.value);
        return (r) => of(r) === v;
      }
      case 'ne': {
        const v = value(node.value);
        return (r) => of(r) !== v;
      }
      case 'lt':
      case 'le':
      case 'gt':
      case 'ge': {
        ordered();
        const v = value(node.value);
        const op = node.op;
        return (r) => {
          const x = of(r);
          if (x === null) return false;
          const c = compare(x, v);
          return op === 'lt' ? c < 0 : op === 'le' ? c <= 0 : op === 'gt' ? c > 0 : c >= 0;
        };
      }
      case 'in':
      case 'nin': {
        if (!node.values.length) throw fieldError(field, `"${node.op}" needs a non-empty list of values.`);
        const set = new Set(node.values.map(value));
        return node.op === 'in' ? (r) => set.has(of(r)) : (r) => of(r) === null || !set.has(of(r));
      }
      case 'isnull':
        return node.value ? (r) => of(r) === null : (r) => of(r) !== null;
      case 'between': {
        ordered();
        const low = value(node.low);
        const high = value(node.high);
        return (r) => {
          const x = of(r);
          return x !== null && compare(x, low) >= 0 && compare(x, high) <= 0;
        };
      }
      default:
        break;
    }
    if (TEXT_OPS.has(node.op)) {
      if (info.pgType !== 'text') throw fieldError(field, `Operator "${node.op}" applies to text fields only.`);
      const insensitive = node.op.startsWith('i');
      const base = node.op.replace(/^i/, '');
      const fold = (s: string) => (insensitive ? s.toLowerCase() : s);
      const needle = fold(String(coerceValue(field, info, String((node as { value: unknown }).value))));
      return (r) => {
        const x = r[field];
        if (typeof x !== 'string') return false;
        const s = fold(x);
        return base === 'contains' ? s.includes(needle) : base === 'startswith' ? s.startsWith(needle) : s.endsWith(needle);
      };
    }
    throw fieldError(field, `Unknown operator "${String(node.op)}".`);
  };
  return walk(tree);
}
