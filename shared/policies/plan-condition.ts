// A plan's formula (plan.ts) as Cerbos' plan condition: `and`/`or`/`not` over the residual
// expressions, read with CEL's semantics (an error admits nothing), admitting for every row
// exactly what the formula does; and its `filterDebug` text.
import type { AtomMode, Formula } from './plan.ts';
import type { PlanExpression, PlanOperand } from './model.ts';

const ATTR = 'request.resource.attr.';
const call = (operator: string, ...operands: PlanOperand[]): PlanOperand => ({ expression: { operator, operands } });
/** Operators that take a null operand without an error (CEL equality and `null in list`; list and map literals). */
const NULL_SAFE = new Set(['eq', 'ne', 'list', 'struct', 'set-field']);

/**
 * The condition under which an atom's residual reads only present attributes, none of them null
 * where null is an error (`null < 3`): `has()` of every attribute it reads (each step of a
 * nested path) and `!= null` where it matters. Attributes read inside a lambda or under
 * `and`/`or`/`if` are left out (CEL may not evaluate them). Without it an attribute the row lacks
 * makes the atom an error; with it, only a present value of an unexpected type can (documented).
 */
function definedness(o: PlanOperand): PlanOperand[] {
  const guards = new Map<string, PlanOperand>();
  const walk = (x: PlanOperand, parent: string | undefined, position: number): void => {
    if ('variable' in x) {
      if (!x.variable.startsWith(ATTR)) return;
      const path = x.variable.slice(ATTR.length).split('.');
      path.forEach((_, i) => {
        const v = ATTR + path.slice(0, i + 1).join('.');
        guards.set(`has ${v}`, call('has', { variable: v }));
      });
      if (!(parent && (NULL_SAFE.has(parent) || (parent === 'in' && position === 0)))) guards.set(`null ${x.variable}`, call('ne', x, { value: null }));
      return;
    }
    if (!('expression' in x)) return;
    const { operator, operands } = x.expression;
    if (['lambda', 'and', 'or', 'if', 'has'].includes(operator)) return;
    operands.forEach((y, i) => walk(y, operator, i));
  };
  walk(o, undefined, 0);
  return [...guards.values()];
}

/**
 * An atom as a plan operand, read with CEL's semantics (an error admits nothing). "Exactly
 * true" is the residual itself and "exactly false" its negation; "not true" and "not false" also
 * hold where the residual is an error, so they say so: `or(not(defined), …)` (definedness).
 */
function atomOperand(mode: AtomMode, o: PlanOperand): PlanOperand {
  if (mode === 'true') return o;
  const negated = call('not', o);
  if (mode === 'false') return negated;
  const guards = definedness(o);
  const body = mode === 'not-true' ? negated : o;
  if (!guards.length) return body;
  return call('or', call('not', guards.length === 1 ? guards[0]! : call('and', ...guards)), body);
}

/** A formula as Cerbos' plan condition (`and`/`or`/`not` over the residual expressions): for every row, it admits exactly what the formula does. */
export function toOperand(f: Formula): PlanOperand {
  if (typeof f === 'boolean') return { value: f };
  if (f.op === 'atom') return atomOperand(f.mode, f.operand);
  return { expression: { operator: f.op, operands: f.args.map(toOperand) } };
}

/** The condition as `filterDebug` text: `(operator operand …)`. */
export function debug(o: PlanOperand): string {
  if ('variable' in o) return o.variable;
  if ('value' in o) return JSON.stringify(o.value);
  const e: PlanExpression = o.expression;
  return `(${e.operator} ${e.operands.map(debug).join(' ')})`;
}
