// Policy conditions are CEL, evaluated by @marcbachmann/cel-js (a maintained implementation with a
// type checker), in one environment holding Cerbos' identifiers and the helper functions its
// policies use. An evaluation error (an absent key, no overload) or a non-boolean result counts
// as false where a condition is decided (CERBOS-NOTES §1); inside one expression CEL's own rules
// hold (`true || error` is true).
import { Environment } from '@marcbachmann/cel-js';
import { matcherProblem } from '../common/linear-regexp.ts';
import { evaluating } from './budget.ts';
import { instrument } from './cel-runtime.ts';

/** Bounds on what one expression may be: conditions are short; these stop pathological input at parse time. */
export const CEL_LIMITS = { maxLength: 4096, maxAstNodes: 1000, maxDepth: 48, maxListElements: 1000, maxMapEntries: 1000, maxCallArguments: 16 };

/** The identifiers a condition may use (`R` = request.resource, `P` = request.principal, `V`, `C`, `G`). */
export const CEL_IDENTIFIERS = ['request', 'R', 'P', 'V', 'variables', 'C', 'constants', 'G', 'globals', 'runtime'] as const;

const ipv4 = (s: string): number | null => {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = n * 256 + Number(p);
  }
  return n;
};

/** IPv4 CIDR membership (IPv6 addresses never match: documented). */
function inIPAddrRange(ip: string, cidr: string): boolean {
  const [net, bits = '32'] = cidr.split('/');
  const a = ipv4(ip);
  const b = ipv4(net);
  const n = Number(bits);
  if (a === null || b === null || !Number.isInteger(n) || n < 0 || n > 32) throw new Error(`invalid IP address or range: ${ip}, ${cidr}`);
  if (n === 0) return true;
  const mask = n === 32 ? 0xffffffff : ~((1 << (32 - n)) - 1) >>> 0;
  return ((a & mask) >>> 0) === ((b & mask) >>> 0);
}

/** A list's elements as a set (ints as numbers: `1 == 1.0`), so that the list helpers are linear, not quadratic. */
const members = (list: unknown[]): Set<unknown> => new Set(list.map((x) => (typeof x === 'bigint' ? Number(x) : x)));
const member = (set: Set<unknown>, x: unknown): boolean => set.has(typeof x === 'bigint' ? Number(x) : x);

function environment(): Environment {
  const env = new Environment({
    unlistedVariablesAreDyn: false,
    homogeneousAggregateLiterals: false,
    limits: {
      maxAstNodes: CEL_LIMITS.maxAstNodes,
      maxDepth: CEL_LIMITS.maxDepth,
      maxListElements: CEL_LIMITS.maxListElements,
      maxMapEntries: CEL_LIMITS.maxMapEntries,
      maxCallArguments: CEL_LIMITS.maxCallArguments,
    },
  });
  for (const name of CEL_IDENTIFIERS) env.registerVariable(name, 'dyn');
  env.registerFunction('now(): google.protobuf.Timestamp', () => new Date());
  env.registerFunction('hasIntersection(list, list): bool', (a: unknown[], b: unknown[]) => {
    const set = members(b);
    return a.some((x) => member(set, x));
  });
  const listFunction = (name: string, returnType: string, handler: (a: unknown[], set: Set<unknown>) => unknown) =>
    env.registerFunction({ name, receiverType: 'list', returnType, params: [{ name: 'other', type: 'list' }], handler: (a: unknown[], b: unknown[]) => handler(a, members(b)) });
  listFunction('intersect', 'list', (a, set) => a.filter((x) => member(set, x)));
  listFunction('except', 'list', (a, set) => a.filter((x) => !member(set, x)));
  listFunction('isSubset', 'bool', (a, set) => a.every((x) => member(set, x)));
  env.registerFunction({ name: 'inIPAddrRange', receiverType: 'string', returnType: 'bool', params: [{ name: 'cidr', type: 'string' }], handler: inIPAddrRange });
  return env;
}

export const celEnv = environment();
instrument(celEnv);

export interface CelProgram {
  source: string;
  /** Where the expression is (`{policy id}: {path}`), for the budget's errors. */
  origin?: string;
  /** cel-js's evaluator (it holds the AST as `.ast`). */
  run: ((activation: Record<string, unknown>) => unknown) & { ast: CelNode };
}
/** cel-js's AST node: `{op, args, start, end}`. */
export interface CelNode {
  op: string;
  args: unknown;
  start: number;
  end: number;
}

export class CelError extends Error {
  readonly position?: number;
  constructor(message: string, position?: number) {
    super(message);
    this.position = position;
  }
}

/** The caret line of cel-js's message gives the column; the first line is the reason. */
function describe(err: unknown, source: string): CelError {
  const text = err instanceof Error ? err.message : String(err);
  const lines = text.split('\n');
  const caret = lines.findIndex((l) => /^\s*\^\s*$/.test(l));
  const codeLine = caret > 0 ? lines[caret - 1] : '';
  const prefix = codeLine.indexOf('| ');
  const column = caret > 0 && prefix >= 0 ? lines[caret].indexOf('^') - (prefix + 2) + 1 : undefined;
  const reason = lines[0].trim();
  return new CelError(column !== undefined && source.length > 0 ? `${reason} (at column ${column})` : reason, column);
}

/** Parses and type-checks one expression; throws CelError with the position of what is wrong. */
export function compileCel(source: string): CelProgram {
  if (typeof source !== 'string' || source.trim() === '') throw new CelError('Expression is empty.');
  if (source.length > CEL_LIMITS.maxLength) throw new CelError(`Expression is longer than ${CEL_LIMITS.maxLength} characters.`);
  let run: CelProgram['run'];
  try {
    run = celEnv.parse(source) as CelProgram['run'];
  } catch (err) {
    throw describe(err, source);
  }
  const checked = (run as unknown as { check(): { valid: boolean; error?: Error } }).check();
  if (!checked.valid) throw describe(checked.error, source);
  const nested = nestedComprehension(run.ast, 0);
  if (nested) throw new CelError(`Comprehensions may not be nested (their cost grows with the product of the lists' sizes) (at column ${nested.start + 1})`, nested.start + 1);
  const refused = refusedPattern(run.ast);
  if (refused) throw new CelError(`matches(): the pattern ${JSON.stringify(refused.pattern)} ${refused.problem} (at column ${refused.node.start + 1})`, refused.node.start + 1);
  return { source, run };
}

/** The pattern argument of a `matches()` call (`s.matches(p)`, `matches(s, p)`), else undefined. */
export function patternArgument(node: CelNode): CelNode | undefined {
  if (node.op !== 'rcall' && node.op !== 'call') return undefined;
  const args = node.args as unknown[];
  if (args[0] !== 'matches') return undefined;
  const params = args[node.op === 'rcall' ? 2 : 1] as CelNode[];
  return params[params.length - 1];
}

/** The first literal `matches()` pattern that RE2 refuses (lookaround, backreferences), with why: refused when the policy is written. */
function refusedPattern(root: CelNode): { node: CelNode; pattern: string; problem: string } | undefined {
  let found: { node: CelNode; pattern: string; problem: string } | undefined;
  visit(root, (node) => {
    const p = patternArgument(node);
    if (found || p?.op !== 'value' || typeof p.args !== 'string') return;
    const problem = matcherProblem(p.args);
    if (problem) found = { node: p, pattern: p.args, problem };
  });
  return found;
}

/** Calls `fn` on every node of an expression. */
export function visit(node: CelNode, fn: (node: CelNode) => void): void {
  if (!node || typeof node !== 'object') return;
  fn(node);
  if (node.op === 'value') return;
  const each = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(each);
    else if (v && typeof v === 'object' && 'op' in v) visit(v as CelNode, fn);
  };
  each(node.args);
}

const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);

/** The first comprehension inside another's body: CEL has no loops, so this bounds a condition's cost to linear in its inputs. */
function nestedComprehension(node: CelNode, depth: number): CelNode | undefined {
  if (!node || typeof node !== 'object') return undefined;
  let inner = depth;
  if (node.op === 'rcall' && COMPREHENSIONS.has((node.args as unknown[])[0] as string)) {
    if (depth > 0) return node;
    inner = depth + 1;
  }
  const visit = (v: unknown): CelNode | undefined => {
    if (Array.isArray(v)) {
      for (const x of v) {
        const found = visit(x);
        if (found) return found;
      }
      return undefined;
    }
    return v && typeof v === 'object' && 'op' in v ? nestedComprehension(v as CelNode, inner) : undefined;
  };
  return node.op === 'value' ? undefined : visit(node.args);
}

/**
 * Runs `work` (synchronous) with stack traces off: a failing condition (an absent attribute) is
 * an everyday outcome here, and capturing the stack of each error was two thirds of a check's time.
 */
export function withoutStacks<T>(work: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return work();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** The condition's value: only `true` is true; errors and other values are false. */
export function holds(program: CelProgram, activation: Record<string, unknown>): boolean {
  evaluating(program);
  try {
    return program.run(activation) === true;
  } catch {
    return false;
  }
}

/** The value of a variable expression, or `undefined` when it fails (a failing variable is absent). */
export function valueOf(program: CelProgram, activation: Record<string, unknown>): unknown {
  evaluating(program);
  try {
    return program.run(activation);
  } catch {
    return undefined;
  }
}

/**
 * A CEL value as JSON, as Cerbos reports rule outputs (google.protobuf.Value): every number a
 * double, timestamps in RFC 3339 (the fraction without trailing zeros, as Go writes it), durations as cel-js writes them,
 * bytes in base64, maps as objects.
 */
export function celToJson(v: unknown): unknown {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Date) return v.toISOString().replace(/\.(\d*?)0*Z$/, (_, digits: string) => (digits ? `.${digits}Z` : 'Z'));
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64');
  if (Array.isArray(v) || v instanceof Set) return [...v].map(celToJson);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), celToJson(x)]));
  if (typeof v !== 'object' || v === undefined) return String(v);
  if (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, celToJson(x)]));
  // cel-js's own value classes: uint (its valueOf is a bigint), duration (toString is CEL's form).
  const primitive = (v as { valueOf(): unknown }).valueOf();
  return typeof primitive === 'bigint' ? Number(primitive) : String(v);
}
