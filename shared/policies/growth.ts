// The static half of the evaluation budget (budget.ts), in the spirit of cel-go's cost
// estimation: before a policy is stored, each expression's largest possible value is estimated
// from its inputs' bounds, as a multiple of the size of the request's attributes. `a + b` may be
// as large as both together, a variable as large as its expression, a list literal as all its
// elements; comparisons, `size()`, `matches()` and the other functions that answer a scalar are
// 0. A chain of variables that each double the previous one (`aN = V.a(N-1) + V.a(N-1)`) grows
// 2^N: over POLICY_LIMITS.maxGrowth it is refused, naming the expression, instead of failing at
// run time on the first large attribute.
import { POLICY_LIMITS } from './budget.ts';
import type { CelNode } from './cel.ts';

/** Operators and functions whose value is a scalar (a bool, a number, a timestamp…): no size. */
const SCALAR = new Set([
  '==', '!=', '<', '<=', '>', '>=', 'in', '!_', '-_', '&&', '||', '-', '*', '/', '%',
  'has', 'size', 'all', 'exists', 'exists_one', 'matches', 'startsWith', 'endsWith', 'contains', 'indexOf', 'lastIndexOf',
  'hasIntersection', 'isSubset', 'inIPAddrRange', 'int', 'uint', 'double', 'bool', 'timestamp', 'duration', 'now', 'type',
  'getFullYear', 'getMonth', 'getDate', 'getDayOfMonth', 'getDayOfWeek', 'getDayOfYear', 'getHours', 'getMinutes', 'getSeconds', 'getMilliseconds',
]);
const COMPREHENSIONS = new Set(['map', 'filter']);
const INPUTS = new Set(['R', 'P', 'request', 'runtime', 'G', 'globals']);

/**
 * How many times the size of the request's attributes the value of `node` may be. `variables`:
 * the growth of the variables it may name (`V.x`); constants and literals are fixed: 0.
 */
export function growth(node: CelNode, variables: ReadonlyMap<string, number>, bound: ReadonlyMap<string, number> = new Map()): number {
  const args = node.args as unknown;
  switch (node.op) {
    case 'value':
      return 0;
    case 'id':
      return bound.get(args as string) ?? (INPUTS.has(args as string) ? 1 : 0);
    case '.':
    case '.?': {
      const [target, field] = args as [CelNode, string];
      if (target.op === 'id' && (target.args === 'V' || target.args === 'variables')) return variables.get(field) ?? 0;
      if (target.op === 'id' && (target.args === 'C' || target.args === 'constants')) return 0;
      return growth(target, variables, bound);
    }
    case '?:': {
      const [, a, b] = args as CelNode[];
      return Math.max(growth(a, variables, bound), growth(b, variables, bound));
    }
    case 'list':
      return sum(args as CelNode[], variables, bound);
    case 'map':
      return sum((args as [CelNode, CelNode][]).flat(), variables, bound);
    case 'call':
    case 'rcall': {
      const name = (args as unknown[])[0] as string;
      if (SCALAR.has(name)) return 0;
      const receiver = node.op === 'rcall' ? [(args as [string, CelNode])[1]] : [];
      const params = (args as unknown[])[node.op === 'rcall' ? 2 : 1] as CelNode[];
      if (node.op === 'rcall' && COMPREHENSIONS.has(name) && params.length === 2 && params[0].op === 'id') {
        const list = growth(receiver[0], variables, bound);
        const inner = new Map(bound).set(params[0].args as string, list);
        return list + growth(params[1], variables, inner);
      }
      return sum([...receiver, ...params], variables, bound);
    }
    default:
      if (SCALAR.has(node.op)) return 0;
      return sum(Array.isArray(args) ? (args as CelNode[]) : [args as CelNode], variables, bound);
  }
}

function sum(nodes: CelNode[], variables: ReadonlyMap<string, number>, bound: ReadonlyMap<string, number>): number {
  let total = 0;
  for (const n of nodes) if (n && typeof n === 'object' && 'op' in n) total += growth(n, variables, bound);
  return total;
}

/** Why an expression of this growth is refused (undefined when it is within POLICY_LIMITS.maxGrowth). */
export function growthProblem(g: number): string | undefined {
  if (g <= POLICY_LIMITS.maxGrowth) return undefined;
  const times = g > 1e6 ? 'more than a million' : String(g);
  return `This expression may build a value ${times} times the size of the request's attributes (at most ${POLICY_LIMITS.maxGrowth}): each concatenation (+) or list of variables adds their sizes, so a chain of variables that doubles a value grows exponentially. Evaluating it could exhaust the server.`;
}
