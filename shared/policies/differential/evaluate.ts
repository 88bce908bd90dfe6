// Evaluates a PlanResources condition tree (Cerbos' operand form, CERBOS-NOTES §6) on one set of
// resource attributes, with CEL's semantics: errors (absent attribute, wrong types, no overload)
// propagate, `and`/`or` absorb them the way CEL's do, and the top-level result admits the row only
// when it is `true` (an error or a non-boolean admits nothing, as a failing check condition).
// Used by the differential test to compare plans by meaning instead of by tree shape (operand
// order is unstable in Cerbos). An operator this evaluator does not know throws: a plan the test
// cannot read fails loudly, never silently.
import { isDeepStrictEqual } from 'node:util';
import { linearMatcher } from '../../common/linear-regexp.ts';
import type { PlanOperand } from '../model.ts';

class CelError {
  readonly message: string;
  constructor(message: string) {
    this.message = message;
  }
}
class Timestamp {
  readonly ms: number;
  constructor(ms: number) {
    this.ms = ms;
  }
}
type Val = unknown;
const isErr = (v: Val): v is CelError => v instanceof CelError;
const err = (message: string) => new CelError(message);

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function typeOf(v: Val): string {
  if (v === null) return 'null';
  if (v instanceof Timestamp) return 'timestamp';
  if (Array.isArray(v)) return 'list';
  return typeof v === 'object' ? 'map' : typeof v;
}

function equal(a: Val, b: Val): boolean {
  if (a instanceof Timestamp && b instanceof Timestamp) return a.ms === b.ms;
  if (typeOf(a) !== typeOf(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  return isDeepStrictEqual(a, b);
}

function compare(op: string, a: Val, b: Val): Val {
  let x: number | string;
  let y: number | string;
  if (typeof a === 'number' && typeof b === 'number') [x, y] = [a, b];
  else if (typeof a === 'string' && typeof b === 'string') [x, y] = [a, b];
  else if (a instanceof Timestamp && b instanceof Timestamp) [x, y] = [a.ms, b.ms];
  else return err(`no overload ${op}(${typeOf(a)}, ${typeOf(b)})`);
  switch (op) {
    case 'lt':
      return x < y;
    case 'le':
      return x <= y;
    case 'gt':
      return x > y;
    default:
      return x >= y;
  }
}

function arithmetic(op: string, a: Val, b: Val): Val {
  if (op === 'add' && typeof a === 'string' && typeof b === 'string') return a + b;
  if (op === 'add' && Array.isArray(a) && Array.isArray(b)) return [...a, ...b];
  if (typeof a !== 'number' || typeof b !== 'number') return err(`no overload ${op}(${typeOf(a)}, ${typeOf(b)})`);
  switch (op) {
    case 'add':
      return a + b;
    case 'sub':
      return a - b;
    case 'mult':
      return a * b;
    case 'div':
      return b === 0 ? err('division by zero') : a / b;
    default:
      return b === 0 ? err('modulus by zero') : a % b;
  }
}

function ipv4(s: string): number | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  return parts.some((p) => p > 255) ? null : parts.reduce((acc, p) => acc * 256 + p, 0);
}

type Env = Record<string, Val>;

function variable(name: string, attrs: Record<string, unknown>, env: Env): Val {
  if (name in env) return env[name];
  const prefix = 'request.resource.attr';
  if (name !== prefix && !name.startsWith(`${prefix}.`)) throw new Error(`plan evaluation: unexpected variable ${name}`);
  let v: Val = attrs;
  for (const key of name.slice(prefix.length + 1).split('.').filter(Boolean)) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || !(key in (v as object))) return err(`no such key: ${key}`);
    v = (v as Record<string, unknown>)[key];
  }
  return v;
}

/** The lambda operand of a comprehension: `{expression: {operator: 'lambda', operands: [body, {variable}]}}`. */
function lambda(op: PlanOperand): { body: PlanOperand; name: string } {
  if (!('expression' in op) || op.expression.operator !== 'lambda') throw new Error('plan evaluation: comprehension without a lambda');
  const [body, v] = op.expression.operands;
  if (!body || !v || !('variable' in v)) throw new Error('plan evaluation: malformed lambda');
  return { body, name: v.variable };
}

function evaluate(op: PlanOperand, attrs: Record<string, unknown>, env: Env): Val {
  if ('value' in op) return op.value;
  if ('variable' in op) return variable(op.variable, attrs, env);
  const { operator, operands } = op.expression;
  const ev = (o: PlanOperand, e: Env = env) => evaluate(o, attrs, e);
  if (operator === 'and' || operator === 'or') {
    // CEL: false (and) / true (or) wins over errors; else any error; else the other value.
    const absorbing = operator === 'or';
    let error: CelError | undefined;
    for (const o of operands) {
      const v = ev(o);
      if (v === absorbing) return absorbing;
      if (isErr(v)) error ??= v;
      else if (typeof v !== 'boolean') error ??= err(`${operator} on a ${typeOf(v)}`);
    }
    return error ?? !absorbing;
  }
  if (operator === 'error') return err('an expression that fails on every row');
  if (operator === 'has') {
    // has(x.f): the field test; x itself must resolve.
    const target = operands[0];
    if (operands.length !== 1 || !target || !('variable' in target)) throw new Error('plan evaluation: has() of something else than a variable path');
    const path = target.variable.split('.');
    const parent = variable(path.slice(0, -1).join('.'), attrs, env);
    if (isErr(parent)) return parent;
    if (!parent || typeof parent !== 'object' || Array.isArray(parent) || parent instanceof Timestamp) return err(`has() on a ${typeOf(parent)}`);
    return path.at(-1)! in parent;
  }
  if (operator === 'if') {
    const c = ev(operands[0]!);
    if (isErr(c)) return c;
    if (typeof c !== 'boolean') return err('if on a non-boolean');
    return ev(c ? operands[1]! : operands[2]!);
  }
  if (['exists', 'all', 'exists_one', 'filter', 'map'].includes(operator)) {
    const list = ev(operands[0]!);
    if (isErr(list)) return list;
    const items = Array.isArray(list) ? list : list && typeof list === 'object' && !(list instanceof Timestamp) ? Object.keys(list) : null;
    if (!items) return err(`${operator} over a ${typeOf(list)}`);
    const { body, name } = lambda(operands[1]!);
    const results = items.map((item) => ev(body, { ...env, [name]: item }));
    if (operator === 'map') return results.find(isErr) ?? results;
    if (operator === 'filter') {
      const bad = results.find((r) => isErr(r) || typeof r !== 'boolean');
      return bad !== undefined ? (isErr(bad) ? bad : err('filter predicate not boolean')) : items.filter((_, i) => results[i] === true);
    }
    if (operator === 'exists') return results.includes(true) ? true : (results.find(isErr) ?? (results.every((r) => r === false) ? false : err('exists predicate not boolean')));
    if (operator === 'all') return results.includes(false) ? false : (results.find(isErr) ?? (results.every((r) => r === true) ? true : err('all predicate not boolean')));
    const bad = results.find((r) => isErr(r) || typeof r !== 'boolean');
    return bad !== undefined ? (isErr(bad) ? bad : err('exists_one predicate not boolean')) : results.filter((r) => r === true).length === 1;
  }
  const args = operands.map((o) => ev(o));
  const failed = args.find(isErr);
  if (failed) return failed;
  const [a, b] = args;
  switch (operator) {
    case 'not':
      return typeof a === 'boolean' ? !a : err(`not on a ${typeOf(a)}`);
    case 'eq':
      return equal(a, b);
    case 'ne':
      return !equal(a, b);
    case 'lt':
    case 'le':
    case 'gt':
    case 'ge':
      return compare(operator, a, b);
    case 'add':
    case 'sub':
    case 'mult':
    case 'div':
    case 'mod':
      return arithmetic(operator, a, b);
    case 'in':
      if (Array.isArray(b)) return b.some((x) => equal(a, x));
      if (b && typeof b === 'object' && !(b instanceof Timestamp)) return typeof a === 'string' && a in b;
      return err(`in on a ${typeOf(b)}`);
    case 'list':
      return args;
    case 'index':
    case 'get-field':
      if (Array.isArray(a) && typeof b === 'number') return b >= 0 && b < a.length && Number.isInteger(b) ? a[b] : err('index out of range');
      if (a && typeof a === 'object' && !Array.isArray(a) && !(a instanceof Timestamp) && typeof b === 'string') return b in a ? (a as Record<string, unknown>)[b] : err(`no such key: ${b}`);
      return err(`${operator} on a ${typeOf(a)}`);
    case 'size':
      if (typeof a === 'string') return [...a].length;
      if (Array.isArray(a)) return a.length;
      if (a && typeof a === 'object' && !(a instanceof Timestamp)) return Object.keys(a).length;
      return err(`size of a ${typeOf(a)}`);
    case 'startsWith':
    case 'endsWith':
    case 'contains':
      if (typeof a !== 'string' || typeof b !== 'string') return err(`no overload ${operator}(${typeOf(a)}, ${typeOf(b)})`);
      return operator === 'startsWith' ? a.startsWith(b) : operator === 'endsWith' ? a.endsWith(b) : a.includes(b);
    case 'matches':
      if (typeof a !== 'string' || typeof b !== 'string') return err(`no overload matches(${typeOf(a)}, ${typeOf(b)})`);
      try {
        return linearMatcher(b).test(a); // RE2, as the engine's matches() (and cel-go's)
      } catch {
        return err(`matches: bad pattern ${b}`);
      }
    case 'lowerAscii':
    case 'upperAscii':
      if (typeof a !== 'string') return err(`no overload ${operator}(${typeOf(a)})`);
      return a.replace(/[A-Za-z]/g, (c) => (operator === 'lowerAscii' ? c.toLowerCase() : c.toUpperCase()));
    case 'hasIntersection':
      if (!Array.isArray(a) || !Array.isArray(b)) return err(`no overload hasIntersection(${typeOf(a)}, ${typeOf(b)})`);
      return a.some((x) => b.some((y) => equal(x, y)));
    case 'timestamp':
      if (a instanceof Timestamp) return a;
      if (typeof a !== 'string' || !RFC3339.test(a)) return err(`timestamp(${JSON.stringify(a)})`);
      return new Timestamp(Date.parse(a));
    case 'inIPAddrRange': {
      if (typeof a !== 'string' || typeof b !== 'string') return err('no overload inIPAddrRange');
      const [net, bits] = b.split('/');
      const ip = ipv4(a);
      const base = ipv4(net ?? '');
      const n = Number(bits);
      if (ip === null || base === null || !Number.isInteger(n) || n < 0 || n > 32) return err('inIPAddrRange: not an IPv4 address or range');
      const mask = n === 0 ? 0 : 2 ** 32 - 2 ** (32 - n);
      return (ip & mask) >>> 0 === (base & mask) >>> 0;
    }
    default:
      throw new Error(`plan evaluation: unsupported operator ${operator}`);
  }
}

/** Whether a plan's condition admits a row with these resource attributes (`true` only). */
export function admits(condition: PlanOperand, attrs: Record<string, unknown>): boolean {
  return evaluate(condition, attrs, {}) === true;
}

/** Whether a plan (kind + condition) admits a row with these attributes. */
export function planAdmits(filter: { kind: string; condition?: PlanOperand }, attrs: Record<string, unknown>): boolean {
  if (filter.kind === 'KIND_ALWAYS_ALLOWED') return true;
  if (filter.kind === 'KIND_ALWAYS_DENIED') return false;
  if (filter.kind !== 'KIND_CONDITIONAL' || !filter.condition) throw new Error(`plan evaluation: unexpected filter ${JSON.stringify(filter)}`);
  return admits(filter.condition, attrs);
}
