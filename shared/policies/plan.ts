// Query plans (Cerbos PlanResources, CERBOS-NOTES §6) built on the decision procedure of checks
// (check.ts), symbolically: the principal, constants, variables and the resource attributes the
// request names are substituted and folded; unknown resource attributes stay variables. The
// result is a formula whose truth, for any row, equals "a check on that row allows" — including
// where Cerbos' own planner disagrees with its checks (§9): DENY and ALLOW combine per role and
// scope exactly as in checks.
//
// Condition leaves are CEL, where an error (absent key, no overload) counts as false. A formula's
// atoms therefore carry a mode: `true` (the expression evaluates to exactly true) or `false`
// (exactly false); negation of a whole formula flips to `not-true`/`not-false`. The SQL compiler
// (data/records/policy-sql.ts) renders each mode with NULL standing for a CEL error.
import { evaluating, step } from './budget.ts';
import { celEnv, type CelNode, type CelProgram } from './cel.ts';
import { scopeChain, type CDerivedRole, type Compiled, type CondNode, type CResourcePolicy, type Locals } from './compile.ts';
import { NO_MATCH, principalChain, resourceChain, roleFamily, rolePolicyOf } from './check.ts';
import type { PlanKind, PlanOperand, PlanRequest, PlanResponse, Principal } from './model.ts';
import { debug, toOperand } from './plan-condition.ts';

export type AtomMode = 'true' | 'false' | 'not-true' | 'not-false';
export type Formula = boolean | { op: 'and' | 'or'; args: Formula[] } | { op: 'atom'; mode: AtomMode; operand: PlanOperand };

// ---- Formula algebra (folded as built) ----

const key = (f: Formula): string => JSON.stringify(f);

function combine(op: 'and' | 'or', parts: Formula[]): Formula {
  const unit = op === 'and';
  const out: Formula[] = [];
  const seen = new Set<string>();
  for (const p of parts) {
    if (p === unit) continue;
    if (p === !unit) return !unit;
    for (const q of typeof p === 'object' && p.op === op ? p.args : [p]) {
      const k = key(q);
      if (!seen.has(k)) seen.add(k), out.push(q);
    }
  }
  if (out.length === 0) return unit;
  return out.length === 1 ? out[0] : { op, args: out };
}
export const and = (...parts: Formula[]): Formula => combine('and', parts);
export const or = (...parts: Formula[]): Formula => combine('or', parts);

const NEGATED: Record<AtomMode, AtomMode> = { true: 'not-true', 'not-true': 'true', false: 'not-false', 'not-false': 'false' };
export function not(f: Formula): Formula {
  if (typeof f === 'boolean') return !f;
  if (f.op === 'atom') return { ...f, mode: NEGATED[f.mode] };
  return combine(f.op === 'and' ? 'or' : 'and', f.args.map(not));
}

// ---- Residual CEL ----

/** `runtime` when some effective derived role depends on the row: expressions using it stay residual. */
const UNKNOWN_RUNTIME = Object.freeze({});

type Residual = { k: 'value'; v: unknown } | { k: 'error' } | { k: 'expr'; e: PlanOperand };

const OPERATORS: Record<string, string> = {
  '==': 'eq',
  '!=': 'ne',
  '<': 'lt',
  '<=': 'le',
  '>': 'gt',
  '>=': 'ge',
  in: 'in',
  '+': 'add',
  '-': 'sub',
  '*': 'mult',
  '/': 'div',
  '%': 'mod',
  '&&': 'and',
  '||': 'or',
  '!_': 'not',
  '-_': 'neg',
  '?:': 'if',
  '[]': 'index',
};
const MACROS = new Set(['exists', 'all', 'exists_one', 'map', 'filter']);

const closedPrograms = new Map<string, CelProgram['run']>();
function evalText(text: string, activation: Record<string, unknown>): Residual {
  let run = closedPrograms.get(text);
  if (!run) {
    if (closedPrograms.size > 10_000) closedPrograms.clear();
    run = celEnv.parse(text) as CelProgram['run'];
    closedPrograms.set(text, run);
  }
  try {
    return { k: 'value', v: run(activation) };
  } catch {
    return { k: 'error' };
  }
}

/**
 * The source text of a node. cel-js's spans leave out grouping parentheses at their edges (a
 * binary node spans its left operand's start to its right operand's end, a unary one ends where
 * its operand ends: `!(x)` spans `!(x`), so the unmatched ones are added back.
 */
function nodeText(source: string, node: CelNode): string {
  let open = 0;
  let close = 0;
  for (let i = node.start; i < node.end; i++) {
    const ch = source[i];
    if (ch === '"' || ch === "'") {
      const raw = /[rR]/.test(source[i - 1] ?? '') || (/[rR]/.test(source[i - 2] ?? '') && /[bB]/.test(source[i - 1]));
      const quote = source.startsWith(ch.repeat(3), i) ? ch.repeat(3) : ch;
      for (i += quote.length; i < node.end && !source.startsWith(quote, i); i += !raw && source[i] === '\\' ? 2 : 1);
      i += quote.length - 1;
    } else if (ch === '/' && source[i + 1] === '/') {
      while (i < node.end && source[i] !== '\n') i++;
    } else if (ch === '(') open++;
    else if (ch === ')') {
      if (open) open--;
      else close++;
    }
  }
  let start = node.start;
  let end = node.end;
  for (; close > 0; close--) start = source.lastIndexOf('(', start - 1);
  for (; open > 0; open--) end = source.indexOf(')', end) + 1;
  return source.slice(start, end);
}

const ARITHMETIC = new Set(['+', '-', '*', '/', '%']);
/** A folded CEL int or uint (a plan's JSON value cannot tell them from doubles). */
const isInt = (r: Residual): boolean => r.k === 'value' && (typeof r.v === 'bigint' || (typeof r.v === 'object' && r.v !== null && typeof (r.v as { valueOf(): unknown }).valueOf() === 'bigint'));
/** A resource attribute, or a field or element of one: a JSON value. */
const isAttribute = (r: Residual): boolean => {
  let o: PlanOperand | undefined = r.k === 'expr' ? r.e : undefined;
  while (o && 'expression' in o && (o.expression.operator === 'get-field' || o.expression.operator === 'index')) o = o.expression.operands[0];
  return !!o && 'variable' in o && o.variable.startsWith('request.resource.attr');
};

/** A plain JSON value for a plan (CEL ints are bigint). */
function plain(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), plain(x)]));
  if (v && typeof v === 'object' && !(v instanceof Date) && !(v instanceof Uint8Array)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

/** A folded value as a plan operand; a timestamp stays one (`timestamp("…")`), not a bare string. */
function valueOperand(v: unknown): PlanOperand {
  if (v instanceof Date) return { expression: { operator: 'timestamp', operands: [{ value: v.toISOString() }] } };
  return { value: plain(v) };
}
const operand = (r: Residual): PlanOperand => (r.k === 'expr' ? r.e : r.k === 'value' ? valueOperand(r.v) : { expression: { operator: 'error', operands: [] } });
const expression = (operator: string, operands: PlanOperand[]): Residual => ({ k: 'expr', e: { expression: { operator, operands } } });
/** An operator or function of its operands: an error when one is (CEL's functions are strict; only `&&`, `||`, `?:` and comprehensions are not). */
const strict = (operator: string, parts: Residual[]): Residual => (parts.some((p) => p.k === 'error') ? { k: 'error' } : expression(operator, parts.map(operand)));

/** The residualizer of one policy's expressions: what is known, and the variables that are not. */
class Residualizer {
  readonly activation: Record<string, unknown>;
  private readonly knownAttrs: ReadonlySet<string>;
  /** Variables whose value depends on unknown attributes: inlined where used. */
  private readonly openVariables = new Map<string, CelProgram>();

  constructor(base: Record<string, unknown>, knownAttrs: ReadonlySet<string>, locals: Locals, runtime: unknown) {
    this.knownAttrs = knownAttrs;
    const V: Record<string, unknown> = {};
    this.activation = { ...base, C: locals.constants, constants: locals.constants, V, variables: V, runtime };
    for (const v of locals.variables) {
      if (this.closed(v.program.run.ast, new Set())) {
        const r = evalText(v.program.source, this.activation);
        if (r.k === 'value') V[v.name] = r.v;
      } else this.openVariables.set(v.name, v.program);
    }
  }

  /** `R.attr.x` / `request.resource.attr.x` not given in the request, `R.id`: the row's values. */
  private unknownPath(node: CelNode): string | null {
    const path = pathOf(node);
    if (!path) return null;
    const norm = path[0] === 'R' ? ['request', 'resource', ...path.slice(1)] : path;
    if (norm[0] !== 'request') return null;
    if (norm.length === 1) return 'request';
    if (norm[1] !== 'resource') return null;
    if (norm.length === 2) return 'request.resource';
    if (norm[2] === 'id') return norm.join('.');
    if (norm[2] !== 'attr') return null;
    if (norm.length === 3) return 'request.resource.attr';
    return this.knownAttrs.has(norm[3]) ? null : norm.join('.');
  }

  private variableRef(node: CelNode): string | null {
    if (node.op !== '.') return null;
    const [target, field] = node.args as [CelNode, string];
    return target.op === 'id' && (target.args === 'V' || target.args === 'variables') ? field : null;
  }

  closed(node: CelNode, open: ReadonlySet<string>): boolean {
    const path = pathOf(node);
    if (path) {
      // A path is decided whole (`R.kind` is known even though a bare `R` is not).
      if (this.unknownPath(node) || open.has(path[0])) return false;
      if ((path[0] === 'V' || path[0] === 'variables') && path.length > 1) return !this.openVariables.has(path[1]);
      return path[0] !== 'runtime' || this.activation.runtime !== UNKNOWN_RUNTIME;
    }
    if (node.op === 'rcall' && MACROS.has((node.args as unknown[])[0] as string)) {
      const [, receiver, params] = node.args as [string, CelNode, CelNode[]];
      if (params.length === 2 && params[0].op === 'id') {
        const inner = new Set(open);
        inner.delete(params[0].args as string);
        return this.closed(receiver, open) && this.closed(params[1], inner);
      }
    }
    return children(node).every((c) => this.closed(c, open));
  }

  /** The residual of a node: a value, an error, or an expression over the unknowns. */
  partial(node: CelNode, source: string, open: ReadonlySet<string>): Residual {
    step(); // a residual's size is bounded by the budget, like an evaluation (inlined variables multiply it)
    if (this.closed(node, open)) return evalText(nodeText(source, node), this.activation);
    const unknown = this.unknownPath(node);
    if (unknown) return { k: 'expr', e: { variable: unknown } };
    const v = this.variableRef(node);
    if (v !== null) {
      const program = this.openVariables.get(v)!;
      return this.partial(program.run.ast, program.source, new Set());
    }
    const args = node.args as unknown;
    switch (node.op) {
      case 'id':
        return { k: 'expr', e: { variable: node.args as string } };
      case '&&':
      case '||': {
        const [a, b] = (args as CelNode[]).map((n) => this.partial(n, source, open));
        const absorbing = node.op === '||';
        for (const [x, y] of [
          [a, b],
          [b, a],
        ]) {
          if (x.k === 'value' && x.v === absorbing) return x;
          if (x.k === 'value' && x.v === !absorbing) return y;
        }
        return expression(OPERATORS[node.op], [operand(a), operand(b)]);
      }
      case '.': {
        const [target, field] = args as [CelNode, string];
        return strict('get-field', [this.partial(target, source, open), { k: 'value', v: field }]);
      }
      case 'call': {
        const [name, params] = args as [string, CelNode[]];
        return strict(name, params.map((p) => this.partial(p, source, open)));
      }
      case 'rcall': {
        const [name, receiver, params] = args as [string, CelNode, CelNode[]];
        if (MACROS.has(name) && params.length === 2 && params[0].op === 'id') {
          const variable = params[0].args as string;
          const body = this.partial(params[1], source, new Set([...open, variable]));
          return expression(name, [operand(this.partial(receiver, source, open)), { expression: { operator: 'lambda', operands: [operand(body), { variable }] } }]);
        }
        return strict(name, [this.partial(receiver, source, open), ...params.map((p) => this.partial(p, source, open))]);
      }
      case 'list':
        return strict('list', (args as CelNode[]).map((p) => this.partial(p, source, open)));
      case 'map':
        return expression(
          'struct',
          (args as [CelNode, CelNode][]).map(([k, x]) => ({ expression: { operator: 'set-field', operands: [operand(this.partial(k, source, open)), operand(this.partial(x, source, open))] } })),
        );
      default: {
        const list = Array.isArray(args) ? (args as CelNode[]) : [args as CelNode];
        const parts = list.map((p) => this.partial(p, source, open));
        if (node.op === '?:') {
          const [c, a, b] = parts as [Residual, Residual, Residual];
          if (c.k === 'value') return c.v === true ? a : c.v === false ? b : { k: 'error' };
          return c.k === 'error' ? c : expression('if', parts.map(operand));
        }
        // An attribute is a JSON value (a double, never a CEL int): arithmetic with an int is an error on every row.
        if (ARITHMETIC.has(node.op) && parts.some(isInt) && parts.some(isAttribute)) return { k: 'error' };
        return strict(OPERATORS[node.op] ?? node.op, parts);
      }
    }
  }

  /** "The expression evaluates to exactly `want`", as a formula over the unknowns. */
  formula(node: CelNode, source: string, want: boolean): Formula {
    step();
    if (this.closed(node, new Set())) {
      const r = evalText(nodeText(source, node), this.activation);
      return r.k === 'value' && r.v === want;
    }
    const v = this.variableRef(node);
    if (v !== null && this.openVariables.has(v)) {
      const program = this.openVariables.get(v)!;
      return this.formula(program.run.ast, program.source, want);
    }
    switch (node.op) {
      case '&&':
      case '||': {
        const [a, b] = (node.args as CelNode[]).map((n) => this.formula(n, source, want));
        // true: both (&&) or either (||); false: either (&&) or both (||).
        return (node.op === '&&') === want ? and(a, b) : or(a, b);
      }
      case '!_':
        return this.formula(node.args as CelNode, source, !want);
      case '?:': {
        const [c, a, b] = node.args as CelNode[];
        return or(and(this.formula(c, source, true), this.formula(a, source, want)), and(this.formula(c, source, false), this.formula(b, source, want)));
      }
    }
    const r = this.partial(node, source, new Set());
    if (r.k === 'value') return r.v === want;
    if (r.k === 'error') return false;
    return { op: 'atom', mode: want ? 'true' : 'false', operand: r.e };
  }
}


function children(node: CelNode): CelNode[] {
  const a = node.args as unknown;
  if (node.op === 'value' || node.op === 'id') return [];
  if (node.op === '.' || node.op === '.?') return [(a as [CelNode])[0]];
  if (node.op === 'call') return (a as [string, CelNode[]])[1];
  if (node.op === 'rcall') return [(a as [string, CelNode, CelNode[]])[1], ...(a as [string, CelNode, CelNode[]])[2]];
  if (node.op === 'map') return (a as [CelNode, CelNode][]).flat();
  if (Array.isArray(a)) return a as CelNode[];
  return a && typeof a === 'object' ? [a as CelNode] : [];
}

function pathOf(node: CelNode): string[] | null {
  if (node.op === 'id') return [node.args as string];
  if (node.op === '.') {
    const [target, field] = node.args as [CelNode, string];
    const p = pathOf(target);
    return p ? [...p, field] : null;
  }
  if (node.op === '[]') {
    const [target, index] = node.args as [CelNode, CelNode];
    const p = pathOf(target);
    return p && index.op === 'value' && typeof index.args === 'string' ? [...p, index.args] : null;
  }
  return null;
}

// ---- The decision procedure, symbolically ----

interface PlanContext {
  compiled: Compiled;
  principal: Principal;
  base: Record<string, unknown>;
  knownAttrs: ReadonlySet<string>;
  residualizers: Map<object, Residualizer>;
  derived: Map<CDerivedRole, Formula>;
}

function residualizer(pc: PlanContext, owner: object, locals: Locals, runtime: unknown = { effectiveDerivedRoles: [] }): Residualizer {
  let r = pc.residualizers.get(owner);
  if (!r) pc.residualizers.set(owner, (r = new Residualizer(pc.base, pc.knownAttrs, locals, runtime)));
  return r;
}

function conditionFormula(r: Residualizer, node: CondNode | undefined): Formula {
  if (!node) return true;
  switch (node.kind) {
    case 'expr':
      evaluating(node.program);
      return r.formula(node.program.run.ast, node.program.source, true);
    case 'all':
      return and(...node.of.map((c) => conditionFormula(r, c)));
    case 'any':
      return or(...node.of.map((c) => conditionFormula(r, c)));
    case 'none':
      return not(or(...node.of.map((c) => conditionFormula(r, c))));
  }
}

function derivedFormula(pc: PlanContext, d: CDerivedRole): Formula {
  let f = pc.derived.get(d);
  if (f === undefined) {
    const held = d.anyParent || pc.principal.roles.some((role) => d.parentRoles.has(role));
    f = held ? conditionFormula(residualizer(pc, d.locals, d.locals), d.condition) : false;
    pc.derived.set(d, f);
  }
  return f;
}

/** `runtime` of a policy: its effective derived roles when every one is known, else unknown. */
function runtimeOf(pc: PlanContext, policy: CResourcePolicy): unknown {
  const names: string[] = [];
  for (const name of policy.referencedDerived) {
    const f = derivedFormula(pc, policy.derived.get(name)!);
    if (typeof f !== 'boolean') return UNKNOWN_RUNTIME;
    if (f) names.push(name);
  }
  return { effectiveDerivedRoles: names.sort() };
}

function resourceAllows(pc: PlanContext, chain: CResourcePolicy[], family: ReadonlySet<string>, action: string): Formula {
  let rest: Formula = false;
  for (let i = chain.length - 1; i >= 0; i--) {
    const p = chain[i];
    const r = residualizer(pc, p, p.locals, runtimeOf(pc, p));
    const denies: Formula[] = [];
    const allows: Formula[] = [];
    const applicable: Formula[] = [];
    for (const rule of p.rules) {
      if (!rule.actions(action)) continue;
      let applies: Formula = rule.anyRole || [...family].some((x) => rule.roles.has(x));
      if (applies !== true) {
        applies = or(
          ...rule.derivedRoles.map((name) => {
            const d = p.derived.get(name)!;
            return d.anyParent || [...family].some((x) => d.parentRoles.has(x)) ? derivedFormula(pc, d) : false;
          }),
        );
      }
      if (applies === false) continue;
      const satisfied = and(applies, conditionFormula(r, rule.condition));
      if (rule.effect === 'EFFECT_DENY') denies.push(satisfied);
      else allows.push(satisfied), applicable.push(applies);
    }
    const denied = or(...denies);
    const allowed = or(...allows);
    rest = p.consent ? and(not(denied), or(allowed, not(or(...applicable))), rest) : and(not(denied), or(allowed, rest));
  }
  return rest;
}

/** The formula "a check of `action` on a row allows", given what the request knows. */
export function planFormula(compiled: Compiled, principal: Principal, resource: PlanRequest['resource'], action: string): { formula: Formula; matchedScope?: string } {
  const P = { id: principal.id, roles: principal.roles, attr: principal.attr ?? {}, scope: principal.scope ?? '', policyVersion: principal.policyVersion ?? 'default' };
  const attr = resource.attr ?? {};
  const R = { kind: resource.kind, attr, scope: resource.scope ?? '', policyVersion: resource.policyVersion ?? 'default' };
  const pc: PlanContext = {
    compiled,
    principal,
    base: { request: { principal: P, resource: R, auxData: {} }, P, R, G: {}, globals: {} },
    knownAttrs: new Set(Object.keys(attr)),
    residualizers: new Map(),
    derived: new Map(),
  };
  const version = resource.policyVersion ?? 'default';
  const scope = resource.scope ?? '';
  const chain = resourceChain(compiled, resource.kind, version, scope);
  let decision: Formula = false;
  if (chain && chain.length) {
    const scopes = scopeChain(scope);
    const roles: Formula[] = [];
    for (const role of new Set(principal.roles)) {
      // The role policies of the role and of every role it inherits from narrow it (as in checks).
      const family = roleFamily(compiled, role, scopes, version);
      const narrowed = and(
        ...[...family].map((member) => {
          const rp = rolePolicyOf(compiled, member, version, scopes);
          if (!rp) return true;
          const r = residualizer(pc, rp, rp.locals);
          return or(...rp.rules.filter((rule) => rule.resource(resource.kind) && rule.actions(action)).map((rule) => conditionFormula(r, rule.condition)));
        }),
      );
      if (narrowed === false) continue;
      roles.push(and(narrowed, resourceAllows(pc, chain, family, action)));
    }
    decision = or(...roles);
  }
  // Principal policies come first and are final when they decide.
  const pchain = principalChain(compiled, principal);
  for (let i = pchain.length - 1; i >= 0; i--) {
    const p = pchain[i];
    const r = residualizer(pc, p, p.locals);
    const denies: Formula[] = [];
    const allows: Formula[] = [];
    let applicable = false;
    for (const rule of p.rules) {
      if (!rule.resource(resource.kind) || !rule.action(action)) continue;
      const c = conditionFormula(r, rule.condition);
      if (rule.effect === 'EFFECT_DENY') denies.push(c);
      else allows.push(c), (applicable = true);
    }
    const denied = or(...denies);
    const allowed = or(...allows);
    decision = p.consent ? and(not(denied), or(allowed, !applicable), decision) : and(not(denied), or(allowed, decision));
  }
  return { formula: decision, ...(chain?.[0]?.scope ? { matchedScope: chain[0].scope } : {}) };
}

export function planResources(compiled: Compiled, req: PlanRequest): PlanResponse {
  const actions = req.actions ?? (req.action !== undefined ? [req.action] : []);
  let formula: Formula = true;
  let matchedScope: string | undefined;
  let noMatch = false;
  for (const action of actions) {
    const r = planFormula(compiled, req.principal, req.resource, action);
    formula = and(formula, r.formula);
    matchedScope ??= r.matchedScope;
    noMatch ||= resourceChain(compiled, req.resource.kind, req.resource.policyVersion ?? 'default', req.resource.scope ?? '') === null;
  }
  if (actions.length === 0) formula = false;
  const kind: PlanKind = formula === true ? 'KIND_ALWAYS_ALLOWED' : formula === false ? 'KIND_ALWAYS_DENIED' : 'KIND_CONDITIONAL';
  const response: PlanResponse = {
    requestId: req.requestId ?? '',
    ...(req.actions ? { actions: req.actions } : { action: req.action }),
    resourceKind: req.resource.kind,
    policyVersion: req.resource.policyVersion ?? 'default',
    filter: kind === 'KIND_CONDITIONAL' ? { kind, condition: toOperand(formula) } : { kind },
  };
  if (req.includeMeta) {
    const filterDebug = noMatch ? NO_MATCH : kind === 'KIND_CONDITIONAL' ? debug(toOperand(formula)) : kind === 'KIND_ALWAYS_ALLOWED' ? '(true)' : '(false)';
    response.meta = { filterDebug, ...(matchedScope ? { matchedScope } : {}) };
  }
  return response;
}
