// A policy plan (policies/plan.ts: a formula over the row's attributes) as a WHERE fragment over a
// table's columns, so that a list, its total, aggregates, exports and bulk writes touch only the
// rows a check would allow — in the same statement. The contract, tested row by row against the
// engine's checks (policy-sql.test.ts): for every row, "the fragment admits it" equals "a check of
// the action on that record allows".
//
// A row's attributes are its record as the API shows it (every field present; NULL as null;
// numbers are CEL doubles, NaN and ±Infinity the strings "NaN", "INF", "-INF"; dates, times and
// UUIDs are strings; no string holds a NUL). Each atom is compiled into two NULL-free conditions,
// T ("evaluates to exactly true") and F ("exactly false"); a CEL error (an absent key, no
// overload: `null < 3`, `"a" < 1`) is neither. Shapes that have no exact SQL reading are refused
// (PlanNotSupported), never approximated.
import { quoteIdent } from '../../db/sql.ts';
import type { AtomMode, Formula } from '../../policies/plan.ts';
import type { PlanOperand } from '../../policies/model.ts';
import type { ColumnInfo, SqlFragment } from '../query/filter.ts';

export class PlanNotSupported extends Error {}

export interface PlanColumns {
  /** Fields by name, over the row alias of the query. */
  columns: ReadonlyMap<string, ColumnInfo>;
  /** The key fields (a single one: `request.resource.id`). */
  pk: readonly string[];
}

const ATTR = 'request.resource.attr.';
const UUID_LOWER = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
/** A date a record can show, exactly (Date.parse takes 2024-02-30; PostgreSQL has no year 0). */
function isoDate(s: string): boolean {
  const m = ISO_DATE.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  return y >= 1 && mo >= 1 && mo <= 12 && d >= 1 && d <= [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1];
}
const NUMBER_TYPES = new Set(['bigint', 'integer', 'double precision']);
/** Column types whose API value is a string, and the SQL giving exactly that string. */
const TEXT_OF: Record<string, (c: string) => string> = {
  text: (c) => c,
  uuid: (c) => `${c}::text`,
  date: (c) => `to_char(${c}, 'YYYY-MM-DD')`, // (`::text` follows the session's DateStyle; a record's date is ISO)
  timestamptz: (c) => `to_char(${c} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
};
/**
 * A number field's value is a JSON number when finite; NaN and ±Infinity have none, and a record
 * shows them as the strings "NaN", "INF", "-INF" (field-types.ts fromStored): that string, NULL
 * for a finite number.
 */
const specialText = (c: string): string => `(CASE WHEN ${c} = 'NaN' THEN 'NaN' WHEN ${c} = 'Infinity' THEN 'INF' WHEN ${c} = '-Infinity' THEN '-INF' END)`;
/** A double that is a JSON number in its record (PostgreSQL sorts NaN above Infinity). */
const finite = (c: string): string => `${c} > '-Infinity' AND ${c} < 'Infinity'`;

type Cond = { t: string; f: string };
const NEVER: Cond = { t: 'FALSE', f: 'FALSE' };

class Compiler {
  readonly params: unknown[] = [];
  private readonly t: PlanColumns;
  constructor(t: PlanColumns) {
    this.t = t;
  }

  bind(value: unknown, cast: string): string {
    this.params.push(value);
    return `?::${cast}`;
  }

  formula(f: Formula): string {
    if (typeof f === 'boolean') return f ? 'TRUE' : 'FALSE';
    if (f.op === 'atom') return this.atom(f.operand, f.mode);
    return `(${f.args.map((a) => this.formula(a)).join(f.op === 'and' ? ' AND ' : ' OR ')})`;
  }

  private atom(o: PlanOperand, mode: AtomMode): string {
    const c = this.cond(o);
    switch (mode) {
      case 'true':
        return c.t;
      case 'false':
        return c.f;
      case 'not-true':
        return `(NOT ${c.t})`;
      case 'not-false':
        return `(NOT ${c.f})`;
    }
  }

  /** T and F of a boolean-valued operand. */
  private cond(o: PlanOperand): Cond {
    if ('value' in o) return o.value === true ? { t: 'TRUE', f: 'FALSE' } : o.value === false ? { t: 'FALSE', f: 'TRUE' } : NEVER;
    if ('variable' in o) {
      const col = this.column(o.variable);
      if (col === 'absent') return NEVER;
      if (col.pgType !== 'boolean') return NEVER; // a non-boolean value is neither true nor false
      return { t: `(${sql(col)} IS TRUE)`, f: `(${sql(col)} IS FALSE)` };
    }
    const { operator, operands } = o.expression;
    if (operator === 'error') return NEVER;
    // These are strict: an operand that is an error (a principal's absent attribute, a failing
    // variable) makes the atom an error, whatever the row. (`and`/`or` absorb one: T and F do it.)
    if (STRICT.has(operator) && operands.some(isError)) return NEVER;
    switch (operator) {
      case 'and':
      case 'or': {
        const [a, b] = operands.map((x) => this.cond(x));
        return operator === 'and' ? { t: `(${a.t} AND ${b.t})`, f: `(${a.f} OR ${b.f})` } : { t: `(${a.t} OR ${b.t})`, f: `(${a.f} AND ${b.f})` };
      }
      case 'not': {
        const a = this.cond(operands[0]);
        return { t: a.f, f: a.t };
      }
      case 'eq':
      case 'ne': {
        const e = this.equals(operands[0], operands[1]);
        return operator === 'eq' ? e : { t: e.f, f: e.t };
      }
      case 'lt':
      case 'le':
      case 'gt':
      case 'ge':
        return this.ordered(operator, operands[0], operands[1]);
      case 'in':
        return this.membership(operands[0], operands[1]);
      case 'startsWith':
      case 'endsWith':
      case 'contains':
        return this.text(operator, operands[0], operands[1]);
      case 'has':
        return this.has(operands[0]);
      default:
        throw new PlanNotSupported(`"${operator}" on a record's attributes cannot be applied to a list.`);
    }
  }

  /** The column of `request.resource.attr.f` (or the key for `request.resource.id`); 'absent' for a field the record does not have. */
  private column(variable: string): ColumnInfo | 'absent' {
    if (variable === 'request.resource.id') {
      if (this.t.pk.length !== 1) throw new PlanNotSupported('request.resource.id needs a single-field primary key.');
      const key = this.t.columns.get(this.t.pk[0])!;
      const text = TEXT_OF[key.pgType];
      if (text) return { ...key, pgType: 'text', sql: text(sql(key)) };
      // Integers and booleans print as String() does; a double's text is not JavaScript's (1e15, 1e-7, INF).
      if (!['bigint', 'integer', 'boolean'].includes(key.pgType)) throw new PlanNotSupported(`request.resource.id of a ${key.pgType} key cannot be applied to a list.`);
      return { ...key, pgType: 'text', sql: `(${sql(key)})::text` };
    }
    if (!variable.startsWith(ATTR)) throw new PlanNotSupported(`"${variable}" cannot be applied to a list.`);
    const name = variable.slice(ATTR.length);
    if (name.includes('.')) throw new PlanNotSupported(`Nested attribute "${name}" cannot be applied to a list.`);
    return this.t.columns.get(name) ?? 'absent';
  }

  private sides(a: PlanOperand, b: PlanOperand): { col: ColumnInfo | 'absent'; value: unknown; flipped: boolean } {
    if ('variable' in a && 'value' in b) return { col: this.column(a.variable), value: b.value, flipped: false };
    if ('variable' in b && 'value' in a) return { col: this.column(b.variable), value: a.value, flipped: true };
    throw new PlanNotSupported('A condition comparing two attributes, or computed values, cannot be applied to a list.');
  }

  /** CEL equality (heterogeneous: a value of another type is unequal, never an error). */
  private equals(a: PlanOperand, b: PlanOperand): Cond {
    const { col, value } = this.sides(a, b);
    if (col === 'absent') return NEVER;
    const c = sql(col);
    if (value === null) return col.pgType === 'jsonb' ? { t: `(${c} IS NULL OR ${c} = 'null'::jsonb)`, f: `(${c} IS NOT NULL AND ${c} <> 'null'::jsonb)` } : { t: `(${c} IS NULL)`, f: `(${c} IS NOT NULL)` };
    const same = this.sameAs(col, value);
    if (same === null) return { t: 'FALSE', f: 'TRUE' };
    return { t: `(${c} IS NOT NULL AND ${same})`, f: `(${c} IS NULL OR NOT ${same})` };
  }

  /** `column = value` for a non-null column, or null when the types never compare equal. */
  private sameAs(col: ColumnInfo, value: unknown): string | null {
    const c = sql(col);
    if (hasNul(value)) return 'FALSE'; // a record has no NUL character (PostgreSQL's text and jsonb cannot hold one)
    if (typeof value === 'number' ? NUMBER_TYPES.has(col.pgType) && roundedInt(value) : col.pgType === 'jsonb' && roundedInt(value)) throw ROUNDED_INT();
    if (col.pgType === 'jsonb') return `${c} = ${this.bind(JSON.stringify(value), 'jsonb')}`;
    if (NUMBER_TYPES.has(col.pgType)) {
      if (col.pgType === 'double precision' && typeof value === 'string') return `COALESCE(${specialText(c)} = ${this.bind(value, 'text')}, FALSE)`;
      if (typeof value !== 'number') return null;
      // A record shows an integer as a JSON number (a double): beyond 2^53 only the double comparison is
      // exact (and -1e300 is no bigint); within, the integer one is the same and keeps indexes usable.
      return col.pgType === 'double precision' || !Number.isSafeInteger(value) ? `${c}::double precision = ${this.bind(value, 'double precision')}` : `${c} = ${this.bind(value, col.pgType)}`;
    }
    if (col.pgType === 'boolean') return typeof value === 'boolean' ? `${c} = ${this.bind(value, 'boolean')}` : null;
    const text = TEXT_OF[col.pgType];
    if (!text) throw new PlanNotSupported(`Comparing a ${col.pgType} field cannot be applied to a list.`);
    if (typeof value !== 'string') return null;
    if (col.pgType === 'uuid') return UUID_LOWER.test(value) ? `${c} = ${this.bind(value, 'uuid')}` : 'FALSE';
    if (col.pgType === 'date') return isoDate(value) ? `${c} = ${this.bind(value, 'date')}` : 'FALSE'; // (no record shows another string)
    return `${text(c)} = ${this.bind(value, 'text')}`;
  }

  /** CEL ordering: numbers with numbers, strings with strings (by code point), booleans; anything else (null too) is an error. */
  private ordered(op: 'lt' | 'le' | 'gt' | 'ge', a: PlanOperand, b: PlanOperand): Cond {
    const { col, value, flipped } = this.sides(a, b);
    if (col === 'absent') return NEVER;
    let sqlOp = { lt: '<', le: '<=', gt: '>', ge: '>=' }[flipped ? ({ lt: 'gt', le: 'ge', gt: 'lt', ge: 'le' } as const)[op] : op];
    const c = sql(col);
    let expr: string;
    let guard = `${c} IS NOT NULL`;
    let bound = value;
    if (typeof value === 'string' && value.includes('\0')) {
      // A record's string has no NUL: below `p\0…` exactly when at most `p`, above it when above `p`.
      bound = value.slice(0, value.indexOf('\0'));
      sqlOp = sqlOp === '<' ? '<=' : sqlOp === '>=' ? '>' : sqlOp;
    }
    if (NUMBER_TYPES.has(col.pgType) && typeof value === 'number') {
      if (roundedInt(value)) throw ROUNDED_INT();
      if (col.pgType !== 'double precision' && Number.isFinite(value)) {
        // An integer column against its own type, so that its index serves the condition: `> 2.5`
        // is `> 2`, `>= 2.5` is `>= 3`, `< 2.5` is `< 3`, `<= 2.5` is `<= 2`.
        const whole = sqlOp === '>' || sqlOp === '<=' ? Math.floor(value) : Math.ceil(value);
        expr = `${c} ${sqlOp} ${this.bind(whole, 'bigint')}`; // int4 and int8 share one btree operator family
      } else expr = `${c}::double precision ${sqlOp} ${this.bind(value, 'double precision')}`;
      if (col.pgType === 'double precision') guard += ` AND ${finite(c)}`; // NaN and INF are strings in a record
    } else if (col.pgType === 'double precision' && typeof value === 'string') {
      guard = `${specialText(c)} IS NOT NULL`;
      expr = `${specialText(c)} COLLATE "C" ${sqlOp} ${this.bind(bound, 'text')}`;
    } else if (col.pgType === 'boolean' && typeof value === 'boolean') {
      expr = `${c} ${sqlOp} ${this.bind(value, 'boolean')}`;
    } else if (TEXT_OF[col.pgType] && typeof value === 'string') {
      expr = `${TEXT_OF[col.pgType](c)} COLLATE "C" ${sqlOp} ${this.bind(bound, 'text')}`;
    } else if (col.pgType === 'jsonb' || !(NUMBER_TYPES.has(col.pgType) || col.pgType === 'boolean' || TEXT_OF[col.pgType])) {
      throw new PlanNotSupported(`Ordering a ${col.pgType} field cannot be applied to a list.`);
    } else return NEVER; // no overload: an error
    return { t: `(${guard} AND ${expr})`, f: `(${guard} AND NOT (${expr}))` };
  }

  /** `x in [values]` (equality with any) and `value in x` (a list or map field). */
  private membership(a: PlanOperand, b: PlanOperand): Cond {
    if ('variable' in a && 'value' in b && Array.isArray(b.value)) {
      if (this.column(a.variable) === 'absent') return NEVER; // an error, even `in []`
      const parts = b.value.map((v) => this.equals(a, { value: v }));
      if (parts.length === 0) return { t: 'FALSE', f: 'TRUE' };
      return { t: `(${parts.map((p) => p.t).join(' OR ')})`, f: `(${parts.map((p) => p.f).join(' AND ')})` };
    }
    if ('value' in a && 'variable' in b) {
      const col = this.column(b.variable);
      if (col === 'absent') return NEVER;
      if (col.pgType !== 'jsonb') return NEVER; // `in` a string, number, boolean or null: no overload, an error
      if (a.value !== null && typeof a.value === 'object') throw new PlanNotSupported('"in" a field cannot be applied to a list unless the value is a scalar.');
      if (roundedInt(a.value)) throw ROUNDED_INT();
      const c = sql(col);
      if (hasNul(a.value)) return { t: 'FALSE', f: `(${c} IS NOT NULL AND jsonb_typeof(${c}) IN ('array', 'object'))` }; // (no NUL in a record)
      const inList = `${c} @> ${this.bind(JSON.stringify([a.value]), 'jsonb')}`;
      // A record's map has string keys; the engine's checks look a key up as a property name
      // (cel-js: `1 in {"1": 0}` and `null in {"null": 0}` hold), so a scalar is found under String(value).
      const inMap = `jsonb_exists(${c}, ${this.bind(String(a.value), 'text')})`;
      // (NULL-free: a NULL field is null in its record, and `x in null` an error)
      const t = `(${c} IS NOT NULL AND ((jsonb_typeof(${c}) = 'array' AND ${inList}) OR (jsonb_typeof(${c}) = 'object' AND ${inMap})))`;
      return { t, f: `(${c} IS NOT NULL AND jsonb_typeof(${c}) IN ('array', 'object') AND NOT ${t})` };
    }
    throw new PlanNotSupported('This "in" condition cannot be applied to a list.');
  }

  private text(op: 'startsWith' | 'endsWith' | 'contains', a: PlanOperand, b: PlanOperand): Cond {
    if (!('variable' in a) || !('value' in b)) throw new PlanNotSupported(`"${op}" with a computed argument cannot be applied to a list.`);
    const col = this.column(a.variable);
    if (col === 'absent' || typeof b.value !== 'string') return NEVER;
    const text = col.pgType === 'double precision' ? specialText : TEXT_OF[col.pgType];
    if (!text) return col.pgType === 'jsonb' ? this.fail(op, col) : NEVER; // numbers and booleans have no such method
    const c = text(sql(col));
    if (b.value.includes('\0')) return { t: 'FALSE', f: `(${c} IS NOT NULL)` }; // (no NUL in a record)
    const v = this.bind(b.value, 'text');
    // (each placeholder is one value: the suffix's length, in code points as PostgreSQL counts them, is written in)
    const expr = op === 'startsWith' ? `starts_with(${c}, ${v})` : op === 'endsWith' ? `right(${c}, ${[...b.value].length}) = ${v}` : `strpos(${c}, ${v}) > 0`;
    return { t: `(${c} IS NOT NULL AND ${expr})`, f: `(${c} IS NOT NULL AND NOT ${expr})` };
  }

  private fail(op: string, col: ColumnInfo): never {
    throw new PlanNotSupported(`"${op}" on a ${col.pgType} field cannot be applied to a list.`);
  }

  /** `has(R.attr.f)`: every field of the table is present in its records (NULL ones too). */
  private has(o: PlanOperand): Cond {
    if (!('variable' in o)) throw new PlanNotSupported('"has" of a computed value cannot be applied to a list.');
    return this.column(o.variable) === 'absent' ? { t: 'FALSE', f: 'TRUE' } : { t: 'TRUE', f: 'FALSE' };
  }
}

/**
 * A plan carries CEL's ints as JSON numbers: beyond 2^53 one may be an int rounded (9223372036854775807
 * reads 2^63), which CEL compares exactly with a record's double and SQL cannot; such a number is refused.
 */
function roundedInt(v: unknown): boolean {
  if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) >= 2 ** 53;
  if (Array.isArray(v)) return v.some(roundedInt);
  if (v && typeof v === 'object') return Object.values(v).some(roundedInt);
  return false;
}
const ROUNDED_INT = (): PlanNotSupported => new PlanNotSupported('A number beyond 2^53 compared with a field cannot be applied to a list (it may stand for a CEL int a double cannot hold).');

function hasNul(v: unknown): boolean {
  if (typeof v === 'string') return v.includes('\0');
  if (Array.isArray(v)) return v.some(hasNul);
  if (v && typeof v === 'object') return Object.entries(v).some(([k, x]) => k.includes('\0') || hasNul(x));
  return false;
}

const STRICT = new Set(['eq', 'ne', 'lt', 'le', 'gt', 'ge', 'in', 'startsWith', 'endsWith', 'contains']);
const isError = (o: PlanOperand): boolean => 'expression' in o && o.expression.operator === 'error';

const sql = (col: ColumnInfo): string => col.sql ?? quoteIdent(col.column);

/** The rows a plan admits, over the table's columns (`?` placeholders). */
export function planSql(formula: Formula, t: PlanColumns): SqlFragment {
  if (formula === true) return { sql: 'TRUE', params: [] };
  if (formula === false) return { sql: 'FALSE', params: [] };
  const c = new Compiler(t);
  const text = c.formula(formula);
  return { sql: text, params: c.params };
}
