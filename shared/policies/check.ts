// Decisions (Cerbos CheckResources, CERBOS-NOTES §1-§5): principal policies first, final when they
// decide; then, for each principal role, the scope chain of the resource's kind from the most
// specific scope up, DENY before ALLOW within a scope, override-parent or parental-consent scopes;
// any role's ALLOW allows. Role policies narrow a role exhaustively. Conditions, variables and
// derived roles are evaluated at most once per resource (memoised), whatever the number of actions.
import { nextResource } from './budget.ts';
import { celToJson, holds, valueOf } from './cel.ts';
import { scopeChain, type CDerivedRole, type CondNode, type Compiled, type COutput, type CPrincipalPolicy, type CResourcePolicy, type CResourceRule, type CRolePolicy, type Locals } from './compile.ts';
import type { ActionMeta, CheckRequest, CheckResponse, CheckResult, Effect, Principal, Resource, RuleOutput } from './model.ts';

export const NO_MATCH = 'NO_MATCH';

type Activation = Record<string, unknown>;

/** The evaluation of one principal against one resource: activations and results memoised. */
export class ResourceEval {
  private readonly base: Activation;
  private readonly activations = new Map<object, Activation>();
  private readonly conditions = new Map<object, boolean>();
  private readonly derivedActive = new Map<CDerivedRole, boolean>();
  private readonly reported = new Set<string>();
  readonly principal: Principal;
  /** The outputs of the rules evaluated, once per rule and action. */
  readonly outputs: RuleOutput[] = [];
  /** The policies that apply to this principal and resource, whatever the action (found once per resource). */
  route: Route | undefined;

  constructor(principal: Principal, resource: Resource) {
    this.principal = principal;
    const P = { id: principal.id, roles: principal.roles, attr: principal.attr ?? {}, scope: principal.scope ?? '', policyVersion: principal.policyVersion ?? 'default' };
    const R = { kind: resource.kind, id: resource.id, attr: resource.attr ?? {}, scope: resource.scope ?? '', policyVersion: resource.policyVersion ?? 'default' };
    this.base = { request: { principal: P, resource: R, auxData: {} }, P, R, G: {}, globals: {}, runtime: { effectiveDerivedRoles: [] } };
  }

  /** The activation for conditions of a policy (its variables and constants; `runtime` of that policy). */
  activation(locals: Locals, owner: object, effectiveDerivedRoles?: () => string[]): Activation {
    let act = this.activations.get(owner);
    if (act) return act;
    const V: Record<string, unknown> = {};
    act = { ...this.base, C: locals.constants, constants: locals.constants, V, variables: V };
    if (effectiveDerivedRoles) act.runtime = { effectiveDerivedRoles: effectiveDerivedRoles() };
    for (const v of locals.variables) {
      if (!locals.used.has(v.name)) continue;
      const value = valueOf(v.program, act);
      if (value !== undefined) V[v.name] = value;
    }
    this.activations.set(owner, act);
    return act;
  }

  condition(node: CondNode | undefined, act: Activation, memoKey: object): boolean {
    if (!node) return true;
    let r = this.conditions.get(memoKey);
    if (r === undefined) {
      r = evalCondition(node, act);
      this.conditions.set(memoKey, r);
    }
    return r;
  }

  /** A rule's output for an action: `ruleActivated` when its condition held, else `conditionNotMet` (no `val` when the expression fails). */
  report(output: COutput, held: boolean, act: Activation, action: string): void {
    const program = held ? output.activated : output.notMet;
    const key = `${output.src}\0${action}`;
    if (!program || this.reported.has(key)) return;
    this.reported.add(key);
    const entry: RuleOutput = { src: output.src, action };
    const value = valueOf(program, act);
    if (value !== undefined) entry.val = celToJson(value);
    this.outputs.push(entry);
  }

  /** A derived role is active when the principal holds a parent role and its condition holds. */
  derived(d: CDerivedRole): boolean {
    let r = this.derivedActive.get(d);
    if (r === undefined) {
      r = (d.anyParent || this.principal.roles.some((role) => d.parentRoles.has(role))) && this.condition(d.condition, this.activation(d.locals, d.locals), d);
      this.derivedActive.set(d, r);
    }
    return r;
  }

  /** The active derived roles some rule of `policy` names (`runtime.effectiveDerivedRoles` there). */
  effectiveDerivedRoles(policy: CResourcePolicy): string[] {
    const out: string[] = [];
    for (const name of policy.referencedDerived) if (this.derived(policy.derived.get(name)!)) out.push(name);
    return out.sort();
  }

  policyActivation(policy: CResourcePolicy): Activation {
    return this.activation(policy.locals, policy, () => this.effectiveDerivedRoles(policy));
  }
}

export function evalCondition(node: CondNode, act: Activation): boolean {
  switch (node.kind) {
    case 'expr':
      return holds(node.program, act);
    case 'all':
      return node.of.every((c) => evalCondition(c, act));
    case 'any':
      return node.of.some((c) => evalCondition(c, act));
    case 'none':
      return !node.of.some((c) => evalCondition(c, act));
  }
}

/** The roles a rule counts for: the role itself and its ancestors through the scope's role policies. */
export function roleFamily(compiled: Compiled, role: string, scopes: string[], version: string): Set<string> {
  const family = new Set([role]);
  const queue = [role];
  while (queue.length) {
    const r = queue.pop()!;
    for (const scope of scopes) {
      const rp = compiled.roles.get(`${r}|${version}`)?.get(scope);
      if (!rp) continue;
      for (const parent of rp.parentRoles) if (!family.has(parent)) family.add(parent), queue.push(parent);
      break;
    }
  }
  return family;
}

/** Whether a derived role's parent roles include one of a role family. */
const heldThroughParent = (d: CDerivedRole, family: ReadonlySet<string>): boolean => d.anyParent || [...family].some((r) => d.parentRoles.has(r));

/** Whether a rule applies to a role family: by role (or `*`), or by an active derived role whose parents include one. */
export function ruleApplies(ev: ResourceEval, rule: CResourceRule, policy: CResourcePolicy, family: ReadonlySet<string>): boolean {
  if (rule.anyRole || [...family].some((r) => rule.roles.has(r))) return true;
  for (const name of rule.derivedRoles) {
    const d = policy.derived.get(name)!;
    if (heldThroughParent(d, family) && ev.derived(d)) return true;
  }
  return false;
}

/** The resource chain of a kind at a scope: null when the scope holds no policy at all (NO_MATCH). */
export function resourceChain(compiled: Compiled, kind: string, version: string, scope: string): CResourcePolicy[] | null {
  if (scope !== '' && !compiled.scopes.has(scope)) return null;
  const byScope = compiled.resources.get(`${kind}|${version}`);
  if (!byScope) return [];
  const out: CResourcePolicy[] = [];
  for (const s of scopeChain(scope)) {
    const p = byScope.get(s);
    if (p) out.push(p);
  }
  return out;
}

/** The most specific role policy of `role` on the scope chain. */
export function rolePolicyOf(compiled: Compiled, role: string, version: string, scopes: string[]): CRolePolicy | undefined {
  const byScope = compiled.roles.get(`${role}|${version}`);
  if (!byScope) return undefined;
  for (const s of scopes) {
    const p = byScope.get(s);
    if (p) return p;
  }
  return undefined;
}

export function principalChain(compiled: Compiled, principal: Principal): CPrincipalPolicy[] {
  const byScope = compiled.principals.get(`${principal.id}|${principal.policyVersion ?? 'default'}`);
  if (!byScope) return [];
  return scopeChain(principal.scope ?? '')
    .map((s) => byScope.get(s))
    .filter((p): p is CPrincipalPolicy => p !== undefined);
}

/** What decide() finds for a principal and a resource before any action: the same for each of its actions. */
interface Route {
  principals: CPrincipalPolicy[];
  /** The resource chain (null: the scope holds no policy, NO_MATCH). */
  chain: CResourcePolicy[] | null;
  first: ActionMeta;
  reportAll: boolean;
  /** Each distinct role of the principal: its family and the role policies that narrow it. */
  roles: { family: ReadonlySet<string>; narrowing: CRolePolicy[] }[];
}

function routeOf(compiled: Compiled, principal: Principal, resource: Resource): Route {
  const principals = principalChain(compiled, principal);
  const version = resource.policyVersion ?? 'default';
  const scope = resource.scope ?? '';
  const chain = resourceChain(compiled, resource.kind, version, scope);
  if (chain === null || chain.length === 0) return { principals, chain, first: { matchedPolicy: NO_MATCH }, reportAll: false, roles: [] };
  const scopes = scopeChain(scope);
  const roles = [...new Set(principal.roles)].map((role) => {
    // The role policies of the role and of every role it inherits from narrow it.
    const family = roleFamily(compiled, role, scopes, version);
    const narrowing: CRolePolicy[] = [];
    for (const member of family) {
      const rp = rolePolicyOf(compiled, member, version, scopes);
      if (rp) narrowing.push(rp);
    }
    return { family, narrowing };
  });
  return {
    principals,
    chain,
    first: { matchedPolicy: chain[0].id, ...(chain[0].scope ? { matchedScope: chain[0].scope } : {}) },
    // With rule outputs, every role's rules are evaluated (their outputs reported); the first ALLOW decides.
    reportAll: chain.some((p) => p.outputs),
    roles,
  };
}

interface Decision {
  effect: Effect;
  meta: ActionMeta;
  /** Whether resource policies were evaluated (not decided by a principal policy). */
  resources: boolean;
}

/** One action on one resource. */
export function decide(compiled: Compiled, ev: ResourceEval, resource: Resource, action: string): Decision {
  const route = (ev.route ??= routeOf(compiled, ev.principal, resource));
  // 1. Principal policies: a decision there is final.
  // A principal ALLOW set aside by a parental-consent scope falls through to the resource policies.
  for (const p of route.principals) {
    const act = ev.activation(p.locals, p);
    let allowed = false;
    let allowMatched = false;
    let denied = false;
    for (const rule of p.rules) {
      if (!rule.resource(resource.kind) || !rule.action(action)) continue;
      const ok = ev.condition(rule.condition, act, rule);
      if (rule.output) ev.report(rule.output, ok, act, action);
      if (rule.effect === 'EFFECT_DENY') denied ||= ok;
      else {
        allowMatched = true;
        allowed ||= ok;
      }
    }
    const meta = { matchedPolicy: p.id, ...(p.scope ? { matchedScope: p.scope } : {}) };
    if (denied || (p.consent && !allowed && allowMatched)) return { effect: 'EFFECT_DENY', meta, resources: false };
    if (!p.consent && allowed) return { effect: 'EFFECT_ALLOW', meta, resources: false };
  }

  // 2. Resource policies, per role.
  const { chain, first, reportAll } = route;
  if (chain === null || chain.length === 0) return { effect: 'EFFECT_DENY', meta: first, resources: true };
  let allow: Decision | undefined;
  let denyMeta: ActionMeta | undefined;
  roles: for (const { family, narrowing } of route.roles) {
    for (const rp of narrowing) {
      if (!rolePolicyAllows(ev, rp, resource.kind, action)) {
        denyMeta ??= { matchedPolicy: rp.id, ...(rp.scope ? { matchedScope: rp.scope } : {}) };
        continue roles;
      }
    }
    const outcome = walkChain(ev, chain, family, action);
    if (outcome.effect === 'EFFECT_ALLOW') {
      allow ??= { effect: 'EFFECT_ALLOW', resources: true, meta: { matchedPolicy: chain[0].id, ...(outcome.scope ? { matchedScope: outcome.scope } : {}) } };
      if (!reportAll) break;
    }
  }
  return allow ?? { effect: 'EFFECT_DENY', resources: true, meta: denyMeta ?? first };
}

/** A role policy only narrows: the action must be listed for the kind, and its condition (if any) hold. */
export function rolePolicyAllows(ev: ResourceEval, rp: CRolePolicy, kind: string, action: string): boolean {
  const act = ev.activation(rp.locals, rp);
  for (const rule of rp.rules) {
    if (rule.resource(kind) && rule.actions(action) && ev.condition(rule.condition, act, rule)) return true;
  }
  return false;
}

/**
 * One role down the chain. Override-parent: the first scope that decides wins. Parental consent:
 * a satisfied ALLOW is set aside (a parent must ALLOW), an applicable ALLOW whose condition fails
 * denies there.
 */
function walkChain(ev: ResourceEval, chain: CResourcePolicy[], family: ReadonlySet<string>, action: string): { effect: Effect; scope?: string } {
  for (const p of chain) {
    const act = ev.policyActivation(p);
    let allowed = false;
    let allowMatched = false;
    let denied = false;
    for (const rule of p.rules) {
      if (!rule.actions(action)) continue;
      if (!ruleApplies(ev, rule, p, family)) {
        // A derived role held through a parent role but not active: Cerbos reports the rule's conditionNotMet.
        if (rule.output && rule.derivedRoles.some((name) => heldThroughParent(p.derived.get(name)!, family))) ev.report(rule.output, false, act, action);
        continue;
      }
      const ok = ev.condition(rule.condition, act, rule);
      if (rule.output) ev.report(rule.output, ok, act, action);
      if (rule.effect === 'EFFECT_DENY') {
        if (ok) denied = true;
      } else {
        allowMatched = true;
        allowed ||= ok;
      }
      if (denied && !p.outputs) break; // with outputs, the policy's other applicable rules report theirs too
    }
    if (denied) return { effect: 'EFFECT_DENY', scope: p.scope };
    if (p.consent && !allowed && allowMatched) return { effect: 'EFFECT_DENY', scope: p.scope };
    if (!p.consent && allowed) return { effect: 'EFFECT_ALLOW', scope: p.scope };
  }
  return { effect: 'EFFECT_DENY' };
}

/** The activated derived roles some rule of the chain names (meta.effectiveDerivedRoles). */
function effectiveDerivedRoles(ev: ResourceEval, chain: CResourcePolicy[] | null): string[] {
  const out = new Set<string>();
  for (const p of chain ?? []) for (const name of ev.effectiveDerivedRoles(p)) out.add(name);
  return [...out].sort();
}

export function checkResources(compiled: Compiled, req: CheckRequest): CheckResponse {
  const results: CheckResult[] = req.resources.map(({ resource, actions }) => {
    nextResource();
    const ev = new ResourceEval(req.principal, resource);
    const effects: Record<string, Effect> = {};
    const metaActions: Record<string, ActionMeta> = {};
    let resourcesEvaluated = false;
    for (const action of actions) {
      const d = decide(compiled, ev, resource, action);
      effects[action] = d.effect;
      metaActions[action] = d.meta;
      resourcesEvaluated ||= d.resources;
    }
    const echo: CheckResult['resource'] = { id: resource.id, kind: resource.kind };
    if (resource.policyVersion !== undefined) echo.policyVersion = resource.policyVersion;
    if (resource.scope !== undefined) echo.scope = resource.scope;
    const result: CheckResult = { resource: echo, actions: effects };
    if (ev.outputs.length) result.outputs = ev.outputs;
    if (req.includeMeta) {
      // Only the resource policies evaluated count (none when principal policies decided every action).
      const edr = resourcesEvaluated ? effectiveDerivedRoles(ev, ev.route?.chain ?? null) : [];
      result.meta = { actions: metaActions, ...(edr.length ? { effectiveDerivedRoles: edr } : {}) };
    }
    return result;
  });
  return { requestId: req.requestId ?? '', results };
}
