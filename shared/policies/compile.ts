// Compiling a site app's policy documents into the structures checks and plans walk: every
// problem found at once (shape, CEL, imports, names, scope chains), so that nothing that fails
// here is ever stored (CERBOS-NOTES §8-§9).
import { validate } from '../common/validation.ts';
import { DomainError } from '../errors.ts';
import { compileCel, CelError, patternArgument, visit, type CelNode, type CelProgram } from './cel.ts';
import { matcherProblem } from '../common/linear-regexp.ts';
import { growth, growthProblem } from './growth.ts';
import { PolicyDocumentSchema } from './document.schemas.ts';
import { anyMatcher, GlobError, globMatcher, type Matcher } from './glob.ts';
import { policyId, type Condition, type Constants, type Effect, type Match, type Output, type PolicyDocument, type Variables } from './model.ts';

export interface CompileIssue {
  /** The policy's id (or its position in the input when it has none yet). */
  policy: string;
  /** Dotted path inside the document: `resourcePolicy.rules.0.condition.match.expr`. */
  path: string;
  message: string;
}

export class PolicyCompileError extends Error {
  readonly issues: CompileIssue[];
  constructor(issues: CompileIssue[]) {
    super(issues.map((i) => `${i.policy}: ${i.path}: ${i.message}`).join('; '));
    this.issues = issues;
  }
}

export type CondNode = { kind: 'expr'; program: CelProgram } | { kind: 'all' | 'any' | 'none'; of: CondNode[] };

/** A policy's variables (in dependency order) and constants, with where each came from. */
export interface Locals {
  constants: Record<string, unknown>;
  variables: { name: string; program: CelProgram; source: string; kind: 'KIND_LOCAL' | 'KIND_IMPORTED' }[];
  /** Each variable's growth (growth.ts): how many times the attributes' size its value may be. */
  growth: Map<string, number>;
  constantSources: Record<string, { source: string; kind: 'KIND_LOCAL' | 'KIND_IMPORTED' }>;
  /** The variables each variable reads. */
  deps: Map<string, Set<string>>;
  /** The variables the policy's conditions and outputs read, with theirs: the only ones a check evaluates (variables have no effects; an unread one would only cost). */
  used: Set<string>;
}

/** Marks a variable, and those it reads, as read by the policy. */
function markUsed(locals: Locals, name: string): void {
  if (locals.used.has(name)) return;
  locals.used.add(name);
  for (const d of locals.deps.get(name) ?? []) markUsed(locals, d);
}

export interface CDerivedRole {
  name: string;
  /** The derived-role set's id: its definitions evaluate with the set's own locals. */
  source: string;
  parentRoles: ReadonlySet<string>;
  anyParent: boolean;
  condition?: CondNode;
  locals: Locals;
}

export interface CResourceRule {
  name: string;
  actionPatterns: string[];
  actions: Matcher;
  effect: Effect;
  roles: ReadonlySet<string>;
  anyRole: boolean;
  derivedRoles: string[];
  condition?: CondNode;
  output?: COutput;
}
/** A rule's output: what is reported when the rule applies and its condition holds (`activated`) or not (`notMet`). */
export interface COutput {
  /** `{policy id}#{rule name}`; an unnamed rule is `rule-NNN` (its position), as Cerbos names it. */
  src: string;
  activated?: CelProgram;
  notMet?: CelProgram;
}
export interface CResourcePolicy {
  id: string;
  kind: string;
  version: string;
  scope: string;
  consent: boolean;
  rules: CResourceRule[];
  /** Whether some rule has an output (checks then evaluate every applicable rule). */
  outputs: boolean;
  /** Imported derived roles by name. */
  derived: ReadonlyMap<string, CDerivedRole>;
  /** The derived roles some rule names (the only ones effectiveDerivedRoles can report). */
  referencedDerived: ReadonlySet<string>;
  locals: Locals;
}

export interface CRoleRule {
  resource: Matcher;
  actions: Matcher;
  condition?: CondNode;
}
export interface CRolePolicy {
  id: string;
  role: string;
  version: string;
  scope: string;
  parentRoles: string[];
  rules: CRoleRule[];
  locals: Locals;
}

export interface CPrincipalRule {
  name: string;
  resource: Matcher;
  action: Matcher;
  effect: Effect;
  condition?: CondNode;
  output?: COutput;
}
export interface CPrincipalPolicy {
  id: string;
  principal: string;
  version: string;
  scope: string;
  consent: boolean;
  rules: CPrincipalRule[];
  locals: Locals;
}

export interface Compiled {
  /** `${kind}|${version}` → scope → policy. */
  resources: Map<string, Map<string, CResourcePolicy>>;
  /** `${role}|${version}` → scope → policy. */
  roles: Map<string, Map<string, CRolePolicy>>;
  /** `${principal}|${version}` → scope → policy. */
  principals: Map<string, Map<string, CPrincipalPolicy>>;
  /** Scopes holding some resource or role policy (a requested scope outside it matches nothing). */
  scopes: Set<string>;
  documents: Map<string, PolicyDocument>;
  derivedSets: Map<string, Map<string, CDerivedRole>>;
}

/** The parent scopes of `scope`, most specific first, ending with the unscoped level. */
export function scopeChain(scope: string): string[] {
  const out: string[] = [];
  let s = scope;
  while (s !== '') {
    out.push(s);
    const dot = s.lastIndexOf('.');
    s = dot < 0 ? '' : s.slice(0, dot);
  }
  out.push('');
  return out;
}

class Problems {
  readonly issues: CompileIssue[] = [];
  add(policy: string, path: string, message: string): void {
    this.issues.push({ policy, path, message });
  }
}

/** The variables and constants an expression names. */
export function referencedNames(program: CelProgram): { variables: Set<string>; constants: Set<string> } {
  const refs = { variables: new Set<string>(), constants: new Set<string>() };
  references(program.run.ast, refs);
  return refs;
}

/** `V.x`, `variables.x`, `C.x`, `constants.x` referenced by an expression. */
function references(node: unknown, into: { variables: Set<string>; constants: Set<string> }): void {
  if (!node || typeof node !== 'object') return;
  const n = node as CelNode;
  if (n.op === '.' && Array.isArray(n.args)) {
    const [target, field] = n.args as [CelNode, string];
    if (target?.op === 'id') {
      if (target.args === 'V' || target.args === 'variables') into.variables.add(field);
      if (target.args === 'C' || target.args === 'constants') into.constants.add(field);
    }
  }
  if (Array.isArray(n.args)) for (const a of n.args) walk(a, into);
  else if (n.args && typeof n.args === 'object') references(n.args, into);
}
function walk(value: unknown, into: { variables: Set<string>; constants: Set<string> }): void {
  if (Array.isArray(value)) for (const v of value) walk(v, into);
  else references(value, into);
}

export function compile(input: PolicyDocument[]): Compiled {
  const problems = new Problems();
  const docs = new Map<string, PolicyDocument>();
  input.forEach((doc, index) => {
    try {
      validate(PolicyDocumentSchema, doc);
    } catch (err) {
      const fields: Record<string, unknown> = err instanceof DomainError ? (err.errors ?? {}) : {};
      const label = safeId(doc) ?? `policies[${index}]`;
      const before = problems.issues.length;
      for (const [path, messages] of Object.entries(fields)) {
        if (Array.isArray(messages)) for (const m of messages) problems.add(label, path, String(m));
      }
      if (problems.issues.length === before) problems.add(label, '', 'Invalid policy document.');
      return;
    }
    const kinds = ['resourcePolicy', 'derivedRoles', 'rolePolicy', 'principalPolicy', 'exportVariables', 'exportConstants'].filter((k) => k in doc);
    if (kinds.length !== 1) {
      problems.add(safeId(doc) ?? `policies[${index}]`, '', kinds.length === 0 ? 'A policy needs one of resourcePolicy, derivedRoles, rolePolicy, principalPolicy, exportVariables, exportConstants.' : `Only one policy kind per document (found ${kinds.join(', ')}).`);
      return;
    }
    const id = policyId(doc);
    if (docs.has(id)) problems.add(id, '', 'Duplicate policy id.');
    if (!doc.disabled) docs.set(id, doc);
  });
  if (problems.issues.length) throw new PolicyCompileError(problems.issues);

  const exportedVariables = new Map<string, Record<string, string>>();
  const exportedConstants = new Map<string, Record<string, unknown>>();
  for (const doc of docs.values()) {
    if (doc.exportVariables) exportedVariables.set(doc.exportVariables.name, doc.exportVariables.definitions);
    if (doc.exportConstants) exportedConstants.set(doc.exportConstants.name, doc.exportConstants.definitions);
  }

  const compileExpr = (policy: string, path: string, source: string): CelProgram | undefined => {
    try {
      return { ...compileCel(source), origin: `${policy}: ${path}` };
    } catch (err) {
      problems.add(policy, path, err instanceof CelError ? err.message : String(err));
      return undefined;
    }
  };

  /** What the budget can know before any request (growth.ts), and `matches()` patterns taken from constants (cel.ts checks literal ones). */
  const checkCost = (policy: string, path: string, program: CelProgram, locals: Locals): number => {
    const g = growth(program.run.ast, locals.growth);
    const tooBig = growthProblem(g);
    if (tooBig) problems.add(policy, path, tooBig);
    visit(program.run.ast, (node) => {
      const p = patternArgument(node);
      if (p?.op !== '.' || (p.args as [CelNode, string])[0].op !== 'id' || !['C', 'constants'].includes((p.args as [CelNode, string])[0].args as string)) return;
      const name = (p.args as [CelNode, string])[1];
      const value = locals.constants[name];
      const problem = typeof value === 'string' ? matcherProblem(value) : undefined;
      if (problem) problems.add(policy, path, `matches(): the pattern of constant "${name}" ${problem}.`);
    });
    return g;
  };

  const localsOf = (policy: string, base: string, variables: Variables | undefined, topLevel: Record<string, string> | undefined, constants: Constants | undefined): Locals => {
    const locals: Locals = { constants: {}, variables: [], growth: new Map(), constantSources: {}, deps: new Map(), used: new Set() };
    for (const name of constants?.import ?? []) {
      const defs = exportedConstants.get(name);
      if (!defs) problems.add(policy, `${base}constants.import`, `Unknown constants set "${name}".`);
      for (const [k, v] of Object.entries(defs ?? {})) {
        if (k in locals.constants) problems.add(policy, `${base}constants`, `Constant "${k}" is defined more than once.`);
        locals.constants[k] = v;
        locals.constantSources[k] = { source: `export_constants.${name}`, kind: 'KIND_IMPORTED' };
      }
    }
    for (const [k, v] of Object.entries(constants?.local ?? {})) {
      if (k in locals.constants) problems.add(policy, `${base}constants.local.${k}`, `Constant "${k}" is defined more than once.`);
      locals.constants[k] = v;
      locals.constantSources[k] = { source: policy, kind: 'KIND_LOCAL' };
    }
    const sources = new Map<string, { expr: string; path: string; source: string; kind: 'KIND_LOCAL' | 'KIND_IMPORTED' }>();
    for (const name of variables?.import ?? []) {
      const defs = exportedVariables.get(name);
      if (!defs) problems.add(policy, `${base}variables.import`, `Unknown variables set "${name}".`);
      for (const [k, expr] of Object.entries(defs ?? {})) {
        if (sources.has(k)) problems.add(policy, `${base}variables`, `Variable "${k}" is defined more than once.`);
        sources.set(k, { expr, path: `${base}variables.import`, source: `export_variables.${name}`, kind: 'KIND_IMPORTED' });
      }
    }
    for (const [k, expr] of [...Object.entries(topLevel ?? {}), ...Object.entries(variables?.local ?? {})]) {
      if (sources.has(k)) problems.add(policy, `${base}variables.local.${k}`, `Variable "${k}" is defined more than once.`);
      sources.set(k, { expr, path: `${base}variables.local.${k}`, source: policy, kind: 'KIND_LOCAL' });
    }
    // Dependency order: a variable may use others defined in any order; a cycle is an error.
    const programs = new Map<string, CelProgram>();
    const deps = locals.deps;
    for (const [k, v] of sources) {
      const program = compileExpr(policy, v.path, v.expr);
      if (!program) continue;
      programs.set(k, program);
      const refs = { variables: new Set<string>(), constants: new Set<string>() };
      references(program.run.ast, refs);
      for (const c of refs.constants) if (!(c in locals.constants)) problems.add(policy, v.path, `Unknown constant "${c}".`);
      for (const d of refs.variables) if (!sources.has(d)) problems.add(policy, v.path, `Unknown variable "${d}".`);
      deps.set(k, refs.variables);
    }
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (k: string): void => {
      if (state.get(k) === 'done' || !programs.has(k)) return;
      if (state.get(k) === 'visiting') {
        problems.add(policy, sources.get(k)!.path, `Variable "${k}" depends on itself.`);
        return;
      }
      state.set(k, 'visiting');
      for (const d of deps.get(k) ?? []) visit(d);
      state.set(k, 'done');
      const s = sources.get(k)!;
      locals.growth.set(k, checkCost(policy, s.path, programs.get(k)!, locals));
      locals.variables.push({ name: k, program: programs.get(k)!, source: s.source, kind: s.kind });
    };
    for (const k of programs.keys()) visit(k);
    return locals;
  };

  /** An expression of a policy: compiled, and the variables and constants it names defined there. */
  const exprOf = (policy: string, path: string, source: string, locals: Locals): CelProgram | undefined => {
    const program = compileExpr(policy, path, source);
    if (!program) return undefined;
    const refs = { variables: new Set<string>(), constants: new Set<string>() };
    references(program.run.ast, refs);
    for (const v of refs.variables) {
      if (!locals.variables.some((x) => x.name === v)) problems.add(policy, path, `Unknown variable "${v}".`);
      else markUsed(locals, v);
    }
    for (const c of refs.constants) if (!(c in locals.constants)) problems.add(policy, path, `Unknown constant "${c}".`);
    checkCost(policy, path, program, locals);
    return program;
  };

  /** A rule's output (`when.ruleActivated`, else the older `expr`; `when.conditionNotMet`); `src` names the rule as Cerbos does. */
  const outputOf = (policy: string, path: string, output: Output | undefined, src: string, locals: Locals): COutput | undefined => {
    if (!output) return undefined;
    const activated = output.when?.ruleActivated;
    const notMet = output.when?.conditionNotMet;
    return {
      src,
      activated:
        activated !== undefined ? exprOf(policy, `${path}.output.when.ruleActivated`, activated, locals)
        : output.expr !== undefined ? exprOf(policy, `${path}.output.expr`, output.expr, locals)
        : undefined,
      notMet: notMet === undefined ? undefined : exprOf(policy, `${path}.output.when.conditionNotMet`, notMet, locals),
    };
  };

  const conditionOf = (policy: string, path: string, condition: Condition | undefined, locals: Locals): CondNode | undefined => {
    if (!condition) return undefined;
    const node = (m: Match, p: string): CondNode | undefined => {
      const keys = Object.keys(m ?? {});
      if (!m || typeof m !== 'object' || keys.length !== 1 || !['expr', 'all', 'any', 'none'].includes(keys[0])) {
        problems.add(policy, p, 'A match needs exactly one of expr, all, any, none.');
        return undefined;
      }
      if (keys[0] !== 'expr') {
        const group = m[keys[0] as 'all'];
        if (!group || !Array.isArray(group.of) || group.of.length === 0 || Object.keys(group).length !== 1) {
          problems.add(policy, `${p}.${keys[0]}`, 'Expected {"of": [conditions]}.');
          return undefined;
        }
      } else if (typeof m.expr !== 'string') {
        problems.add(policy, `${p}.expr`, 'Not a valid string.');
        return undefined;
      }
      if (m.expr !== undefined) {
        const program = exprOf(policy, `${p}.expr`, m.expr, locals);
        return program && { kind: 'expr', program };
      }
      const kind = (['all', 'any', 'none'] as const).find((k) => m[k]);
      if (!kind) return undefined;
      const of = m[kind]!.of.map((c, i) => node(c, `${p}.${kind}.of.${i}`));
      return of.every(Boolean) ? { kind, of: of as CondNode[] } : undefined;
    };
    return node(condition.match, `${path}.match`);
  };

  const never: Matcher = () => false;
  const matcherOf = (policy: string, path: string, make: () => Matcher): Matcher => {
    try {
      return make();
    } catch (err) {
      if (!(err instanceof GlobError)) throw err;
      problems.add(policy, path, err.message);
      return never;
    }
  };

  const derivedSets = new Map<string, Map<string, CDerivedRole>>();
  for (const [id, doc] of docs) {
    const d = doc.derivedRoles;
    if (!d) continue;
    const locals = localsOf(id, 'derivedRoles.', d.variables, doc.variables, d.constants);
    const set = new Map<string, CDerivedRole>();
    d.definitions.forEach((def, i) => {
      if (set.has(def.name)) problems.add(id, `derivedRoles.definitions.${i}.name`, `Derived role "${def.name}" is defined more than once.`);
      set.set(def.name, {
        name: def.name,
        source: id,
        parentRoles: new Set(def.parentRoles),
        anyParent: def.parentRoles.includes('*'),
        condition: conditionOf(id, `derivedRoles.definitions.${i}.condition`, def.condition, locals),
        locals,
      });
    });
    derivedSets.set(d.name, set);
  }

  const out: Compiled = { resources: new Map(), roles: new Map(), principals: new Map(), scopes: new Set(), documents: docs, derivedSets };
  const put = <T>(index: Map<string, Map<string, T>>, key: string, scope: string, value: T) => {
    let m = index.get(key);
    if (!m) index.set(key, (m = new Map()));
    m.set(scope, value);
  };

  for (const [id, doc] of docs) {
    if (doc.resourcePolicy) {
      const p = doc.resourcePolicy;
      const locals = localsOf(id, 'resourcePolicy.', p.variables, doc.variables, p.constants);
      const derived = new Map<string, CDerivedRole>();
      (p.importDerivedRoles ?? []).forEach((name, i) => {
        const set = derivedSets.get(name);
        if (!set) {
          problems.add(id, `resourcePolicy.importDerivedRoles.${i}`, `Unknown derived roles "${name}".`);
          return;
        }
        for (const [k, v] of set) {
          if (derived.has(k)) problems.add(id, `resourcePolicy.importDerivedRoles.${i}`, `Derived role "${k}" is imported more than once.`);
          derived.set(k, v);
        }
      });
      const names = new Set<string>();
      const referencedDerived = new Set<string>();
      const rules = p.rules.map((r, i): CResourceRule => {
        const path = `resourcePolicy.rules.${i}`;
        const name = r.name ?? `rule-${String(i + 1).padStart(3, '0')}`;
        if (r.name !== undefined) {
          if (names.has(r.name)) problems.add(id, `${path}.name`, `Rule name "${r.name}" is used more than once.`);
          names.add(r.name);
        }
        if (!(r.roles?.length || r.derivedRoles?.length)) problems.add(id, path, 'A rule needs roles or derivedRoles.');
        (r.derivedRoles ?? []).forEach((dr, j) => {
          if (!derived.has(dr)) problems.add(id, `${path}.derivedRoles.${j}`, `Derived role "${dr}" is not defined in any imported derived roles.`);
          referencedDerived.add(dr);
        });
        return {
          name,
          actionPatterns: r.actions,
          actions: matcherOf(id, `${path}.actions`, () => anyMatcher(r.actions)),
          effect: r.effect,
          roles: new Set(r.roles ?? []),
          anyRole: (r.roles ?? []).includes('*'),
          derivedRoles: r.derivedRoles ?? [],
          condition: conditionOf(id, `${path}.condition`, r.condition, locals),
          output: outputOf(id, path, r.output, `${id}#${name}`, locals),
        };
      });
      const scope = p.scope ?? '';
      put(out.resources, `${p.resource}|${p.version}`, scope, {
        id,
        kind: p.resource,
        version: p.version,
        scope,
        consent: p.scopePermissions === 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS',
        rules,
        outputs: rules.some((r) => r.output),
        derived,
        referencedDerived,
        locals,
      });
      out.scopes.add(scope);
    } else if (doc.rolePolicy) {
      const p = doc.rolePolicy;
      const locals = localsOf(id, 'rolePolicy.', p.variables, doc.variables, p.constants);
      const scope = p.scope ?? '';
      put(out.roles, `${p.role}|${p.version ?? 'default'}`, scope, {
        id,
        role: p.role,
        version: p.version ?? 'default',
        scope,
        parentRoles: p.parentRoles ?? [],
        rules: p.rules.map((r, i) => ({
          resource: matcherOf(id, `rolePolicy.rules.${i}.resource`, () => globMatcher(r.resource)),
          actions: matcherOf(id, `rolePolicy.rules.${i}.allowActions`, () => anyMatcher(r.allowActions)),
          condition: conditionOf(id, `rolePolicy.rules.${i}.condition`, r.condition, locals),
        })),
        locals,
      });
      out.scopes.add(scope);
    } else if (doc.principalPolicy) {
      const p = doc.principalPolicy;
      const locals = localsOf(id, 'principalPolicy.', p.variables, doc.variables, p.constants);
      const scope = p.scope ?? '';
      const rules: CPrincipalRule[] = [];
      p.rules.forEach((r, i) =>
        r.actions.forEach((a, j) =>
          rules.push({
            name: a.name ?? `${r.resource}:${a.action}`,
            resource: matcherOf(id, `principalPolicy.rules.${i}.resource`, () => globMatcher(r.resource)),
            action: matcherOf(id, `principalPolicy.rules.${i}.actions.${j}.action`, () => globMatcher(a.action)),
            effect: a.effect,
            condition: conditionOf(id, `principalPolicy.rules.${i}.actions.${j}.condition`, a.condition, locals),
            output: outputOf(id, `principalPolicy.rules.${i}.actions.${j}`, a.output, `${id}#${a.name ?? `${r.resource}_rule-${String(j + 1).padStart(3, '0')}`}`, locals),
          }),
        ),
      );
      put(out.principals, `${p.principal}|${p.version}`, scope, {
        id,
        principal: p.principal,
        version: p.version,
        scope,
        consent: p.scopePermissions === 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS',
        rules,
        locals,
      });
    }
  }

  // A scoped policy needs one of its kind and version at every ancestor scope.
  for (const index of [out.resources, out.principals] as Map<string, Map<string, { id: string; scope: string }>>[]) {
    for (const byScope of index.values()) {
      for (const p of byScope.values()) {
        for (const ancestor of scopeChain(p.scope).slice(1)) {
          if (!byScope.has(ancestor)) {
            problems.add(p.id, 'scope', `Missing ancestor policy: no policy of the same kind and version at scope "${ancestor}".`);
            break;
          }
        }
      }
    }
  }

  if (problems.issues.length) throw new PolicyCompileError(problems.issues);
  return out;
}

function safeId(doc: PolicyDocument): string | undefined {
  try {
    return policyId(doc);
  } catch {
    return undefined;
  }
}
