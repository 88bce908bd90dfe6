// What the policy environment changes in cel-js's evaluator (cel.ts builds the environment, then
// calls `instrument` once, after its last registration). cel-js 8.0 keeps its evaluator and
// registry private: the evaluator is reached as the argument of the first node it evaluates, the
// registry as the evaluator's `registry`, and the overload declarations as the public
// `declarations` of the registry's candidate lists (the package is pinned; cel.test.ts fails if
// any of this stops working).
//
// - Runtime errors are one shared EvaluationError (quietRuntimeErrors).
// - Every node evaluated, and the sizes of the values every operator and function takes and
//   gives, are charged to the call's budget (budget.ts); a value over POLICY_LIMITS.maxValueSize
//   fails the evaluation.
// - `matches()` (`s.matches(p)` and `matches(s, p)`) runs on RE2 (common/linear-regexp.ts), never
//   on the backtracking RegExp cel-js uses: linear in the input whatever the pattern; a pattern
//   RE2 refuses is an error (false).
import { EvaluationError, type Environment } from '@marcbachmann/cel-js';
import { linearMatcher } from '../common/linear-regexp.ts';
import { charge, produced, sizeOf, step, weightOf } from './budget.ts';

type Handler = (...args: unknown[]) => unknown;
interface Declaration {
  handler: Handler;
  macro?: unknown;
}
interface Candidates {
  declarations: Declaration[];
}
interface Registry {
  functionCandidates(receiver: boolean, name: string, args: number): Candidates;
  operatorCandidates(op: string): Candidates;
}
interface Evaluator {
  createError?: unknown;
  registry?: Registry;
  run?: (ast: { evaluate: (ev: unknown, ast: unknown, ctx: unknown) => unknown }, ctx: unknown) => unknown;
}

/** The operators cel-js resolves through overload declarations. */
const OPERATORS = ['==', '!=', '<', '<=', '>', '>=', 'in', '+', '-', '*', '/', '%', '!_', '-_'];

/** The one runtime error (see quietRuntimeErrors). */
export const EVALUATION_FAILED = new EvaluationError('evaluation error');

const broken = (what: string): Error => new Error(`cel-js: ${what} (its internals changed): see shared/policies/cel-runtime.ts`);

/** The environment's evaluator, caught while it evaluates a probe. */
function evaluatorOf(env: Environment): Evaluator {
  const probe = env.parse('true') as unknown as { (ctx: object): unknown; ast: { evaluate: (ev: object, ...rest: unknown[]) => unknown } };
  let evaluator: Evaluator | undefined;
  const evaluate = probe.ast.evaluate;
  probe.ast.evaluate = function (this: unknown, ev, ...rest) {
    evaluator = ev as Evaluator;
    return evaluate.call(this, ev, ...rest);
  };
  probe({});
  if (typeof evaluator?.createError !== 'function' || typeof evaluator.run !== 'function' || !evaluator.registry) throw broken('the evaluator was not found');
  return evaluator;
}

/**
 * Runtime errors without a message. cel-js builds every EvaluationError with a caret-highlighted
 * copy of the source, but here a failing condition (an absent attribute) is an everyday outcome
 * whose message nobody reads: a runtime error counts as false (`holds`) or as an absent value
 * (`valueOf`, plan.ts). Building them was a third of a check's time. So the evaluator throws one
 * shared EvaluationError instead: still an EvaluationError, so `||`, `&&`, `?:` and optionals
 * treat it as CEL's error value. Parse and type-check errors come from the parser and the type
 * checker and keep their messages and positions.
 */
function quietRuntimeErrors(evaluator: Evaluator): void {
  evaluator.createError = () => EVALUATION_FAILED;
}

/** Every node the evaluator runs is one step of the budget. */
function meterSteps(evaluator: Evaluator): void {
  evaluator.run = function (ast, ctx) {
    step();
    return ast.evaluate(this, ast, ctx);
  };
}

/** A declaration with another handler (cel-js freezes its declarations: a copy replaces it). */
const withHandler = (d: Declaration, handler: Handler): Declaration => Object.assign(Object.create(Object.getPrototypeOf(d)) as Declaration, d, { handler });

/** Work the result of a function costs before it exists (`join`: the separator once per element). */
const AHEAD: Record<string, (args: unknown[]) => number> = {
  join: ([list, sep]) => sizeOf(list) * (1 + sizeOf(sep)),
};

/** An operator's handler, charged with its operands' and its result's sizes (`+` is refused before it builds too big a value). */
const meteredOperator =
  (op: string, h: Handler): Handler =>
  (a, b, ast, ev) => {
    const weight = weightOf(a) + weightOf(b);
    if (op === '+') {
      produced(sizeOf(a) + sizeOf(b), weight);
      // list + list: concat copies in one native step (cel-js spreads both, three times slower).
      if (Array.isArray(a) && Array.isArray(b)) return a.concat(b);
    } else if (weight) charge(weight);
    const r = h(a, b, ast, ev);
    if (op !== '+' && typeof r !== 'boolean') produced(sizeOf(r), weightOf(r));
    return r;
  };

/** A function's handler, charged with its arguments' and its result's sizes. */
const meteredFunction = (name: string, h: Handler): Handler => {
  const ahead = AHEAD[name];
  return function (this: unknown) {
    // `arguments`, not a rest parameter: cel-js applies the handler to an array already, no second one per call.
    const args = arguments as unknown as unknown[];
    let weight = 0;
    for (let i = 0; i < args.length; i++) weight += weightOf(args[i]);
    if (weight) charge(weight);
    if (ahead) produced(ahead(args), 0);
    const r = h.apply(this, args);
    if (typeof r !== 'boolean') produced(sizeOf(r), weightOf(r));
    return r;
  };
};

/** Compiling a pattern costs about as much as 128 units per character (2.5 ms for 1,000 characters). */
const compiled = (pattern: string): void => charge(pattern.length << 7);

/** CEL's `matches` on RE2: charged with the input's length times the program's size (and a new pattern's compilation). */
function linearMatches(s: unknown, pattern: unknown): boolean {
  if (typeof s !== 'string' || typeof pattern !== 'string') throw EVALUATION_FAILED;
  let matcher;
  try {
    matcher = linearMatcher(pattern, compiled);
  } catch {
    throw EVALUATION_FAILED; // a pattern RE2 refuses (lookaround, backreferences): an error, so false
  }
  charge(Math.floor(((s.length + 1) * matcher.size) / 64));
  return matcher.test(s);
}

/** Installs the runtime behaviour above, once the environment's own functions are registered. */
export function instrument(env: Environment): void {
  env.registerFunction('matches(string, string): bool', linearMatches);
  const evaluator = evaluatorOf(env);
  quietRuntimeErrors(evaluator);
  meterSteps(evaluator);
  const registry = evaluator.registry!;
  const replace = (candidates: Candidates, wrap: (d: Declaration) => Handler) => {
    candidates.declarations.forEach((d, i) => {
      if (!d.macro) candidates.declarations[i] = withHandler(d, wrap(d));
    });
  };
  const matches = registry.functionCandidates(true, 'matches', 1);
  if (matches.declarations.length !== 1) throw broken('string.matches was not found');
  replace(matches, () => linearMatches);
  const seen = new Set<string>();
  for (const f of env.getDefinitions().functions) {
    const key = `${f.receiverType ? 'r' : ''}|${f.name}|${f.params.length}`;
    if (seen.has(key)) continue;
    seen.add(key);
    replace(registry.functionCandidates(Boolean(f.receiverType), f.name, f.params.length), (d) => meteredFunction(f.name, d.handler));
  }
  for (const op of OPERATORS) replace(registry.operatorCandidates(op), (d) => meteredOperator(op, d.handler));
}
