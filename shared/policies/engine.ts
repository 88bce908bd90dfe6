// The policy engine: a site app's policy documents compiled once (compile.ts), then checks
// (check.ts), query plans (plan.ts) and inspection on the compiled form, in process.
import { metered } from './budget.ts';
import { checkResources } from './check.ts';
import { compileCel, withoutStacks, type CelNode, type CelProgram } from './cel.ts';
import { compile, referencedNames, type Compiled, type Locals } from './compile.ts';
import type { CheckRequest, CheckResponse, PlanRequest, PlanResponse, PolicyDocument } from './model.ts';
import { planFormula, planResources, type Formula } from './plan.ts';

export { PolicyCompileError, type CompileIssue } from './compile.ts';
export type { Formula } from './plan.ts';

export interface InspectResult {
  policyId: string;
  actions?: string[];
  derivedRoles?: { name: string; kind: 'KIND_IMPORTED' | 'KIND_EXPORTED'; source: string }[];
  variables?: { name: string; value: string; kind: string; source: string; used: boolean }[];
  constants?: { name: string; value: unknown; kind: string; source: string; used: boolean }[];
  attributes?: { kind: 'KIND_PRINCIPAL_ATTRIBUTE' | 'KIND_RESOURCE_ATTRIBUTE'; name: string }[];
}

export class PolicySet {
  readonly compiled: Compiled;
  constructor(compiled: Compiled) {
    this.compiled = compiled;
  }

  check(req: CheckRequest): CheckResponse {
    return run(req.resources.length, () => checkResources(this.compiled, req));
  }

  /** Several checks (AuthZEN evaluations) under one budget: `until` stops after the response it is true of. */
  checkEach(reqs: CheckRequest[], until: (res: CheckResponse) => boolean = () => false): CheckResponse[] {
    return run(
      reqs.reduce((n, r) => n + r.resources.length, 0),
      () => {
        const out: CheckResponse[] = [];
        for (const req of reqs) {
          out.push(checkResources(this.compiled, req));
          if (until(out[out.length - 1]!)) break;
        }
        return out;
      },
    );
  }

  plan(req: PlanRequest): PlanResponse {
    return run(req.actions?.length ?? 1, () => planResources(this.compiled, req));
  }

  /** The plan of one action as a formula (records compile it into SQL). */
  formula(principal: PlanRequest['principal'], resource: PlanRequest['resource'], action: string): Formula {
    return run(1, () => planFormula(this.compiled, principal, resource, action).formula);
  }

  /** Per policy: actions, derived roles, variables, constants and the attributes its expressions read. */
  inspect(): Record<string, InspectResult> {
    const out: Record<string, InspectResult> = {};
    for (const [id, doc] of this.compiled.documents) {
      const result: InspectResult = { policyId: id };
      const programs: CelProgram[] = [];
      const collect = (value: unknown): void => {
        if (Array.isArray(value)) value.forEach(collect);
        else if (value && typeof value === 'object')
          for (const [k, v] of Object.entries(value)) {
            if (k === 'expr' && typeof v === 'string') programs.push(compileCel(v));
            else if (typeof v === 'object') collect(v);
          }
      };
      const p = doc.resourcePolicy;
      if (p) {
        result.actions = [...new Set(p.rules.flatMap((r) => r.actions))].sort();
        result.derivedRoles = (p.importDerivedRoles ?? []).flatMap((set) =>
          [...(this.compiled.derivedSets.get(set)?.keys() ?? [])].map((name) => ({ name, kind: 'KIND_IMPORTED' as const, source: `derived_roles.${set}` })),
        );
        collect(p.rules);
      }
      if (doc.rolePolicy) {
        result.actions = [...new Set(doc.rolePolicy.rules.flatMap((r) => r.allowActions))].sort();
        collect(doc.rolePolicy.rules);
      }
      if (doc.principalPolicy) {
        result.actions = [...new Set(doc.principalPolicy.rules.flatMap((r) => r.actions.map((a) => a.action)))].sort();
        collect(doc.principalPolicy.rules);
      }
      if (doc.derivedRoles) {
        result.derivedRoles = doc.derivedRoles.definitions.map((d) => ({ name: d.name, kind: 'KIND_EXPORTED' as const, source: id }));
        collect(doc.derivedRoles.definitions);
      }
      const locals = this.localsOf(id);
      if (locals) programs.push(...locals.variables.map((v) => v.program));
      const usedVariables = new Set<string>();
      const usedConstants = new Set<string>();
      const attributes = new Map<string, { kind: 'KIND_PRINCIPAL_ATTRIBUTE' | 'KIND_RESOURCE_ATTRIBUTE'; name: string }>();
      for (const program of programs) {
        const refs = referencedNames(program);
        refs.variables.forEach((v) => usedVariables.add(v));
        refs.constants.forEach((c) => usedConstants.add(c));
        for (const a of attributesRead(program.run.ast)) attributes.set(`${a.kind}|${a.name}`, a);
      }
      if (locals?.variables.length) {
        result.variables = locals.variables.map((v) => ({ name: v.name, value: v.program.source, kind: v.kind, source: v.source, used: usedVariables.has(v.name) }));
      }
      const constants = Object.entries(locals?.constants ?? {});
      if (constants.length) result.constants = constants.map(([name, value]) => ({ name, value, ...locals!.constantSources[name], used: usedConstants.has(name) }));
      if (result.derivedRoles?.length === 0) delete result.derivedRoles;
      if (attributes.size) result.attributes = [...attributes.values()].sort((a, b) => `${a.kind}|${a.name}`.localeCompare(`${b.kind}|${b.name}`));
      out[id] = result;
    }
    return out;
  }

  private localsOf(id: string): Locals | undefined {
    for (const index of [this.compiled.resources, this.compiled.roles, this.compiled.principals] as Map<string, Map<string, { id: string; locals: Locals }>>[]) {
      for (const byScope of index.values()) for (const p of byScope.values()) if (p.id === id) return p.locals;
    }
    for (const set of this.compiled.derivedSets.values()) for (const d of set.values()) if (d.source === id) return d.locals;
    return undefined;
  }
}

/**
 * The one way into the engine's evaluation: without stack traces (a failing condition is an
 * everyday outcome) and under the budget of `resources` resources (budget.ts), so that every
 * caller — the check and plan routes, AuthZEN, records, storage — is bounded the same way.
 */
function run<T>(resources: number, work: () => T): T {
  return withoutStacks(() => metered(resources, work));
}

/** `R.attr.x`, `P.attr.x` (and the `request.` forms) an expression reads. */
function attributesRead(node: CelNode, out: { kind: 'KIND_PRINCIPAL_ATTRIBUTE' | 'KIND_RESOURCE_ATTRIBUTE'; name: string }[] = []): typeof out {
  if (node.op === '.') {
    const [target, field] = node.args as [CelNode, string];
    const path: string[] = [];
    for (let n: CelNode = target; ; ) {
      if (n.op === 'id') {
        path.unshift(n.args as string);
        break;
      }
      if (n.op !== '.') break;
      path.unshift((n.args as [CelNode, string])[1]);
      n = (n.args as [CelNode, string])[0];
    }
    const whose = path.join('.');
    if (whose === 'R.attr' || whose === 'request.resource.attr') out.push({ kind: 'KIND_RESOURCE_ATTRIBUTE', name: field });
    if (whose === 'P.attr' || whose === 'request.principal.attr') out.push({ kind: 'KIND_PRINCIPAL_ATTRIBUTE', name: field });
  }
  const args = node.args as unknown;
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === 'object' && 'op' in v) attributesRead(v as CelNode, out);
  };
  if (node.op !== 'value') visit(args);
  return out;
}

/** Compiles an app's policies (disabled ones are left out); throws PolicyCompileError listing every problem. */
export function compilePolicies(docs: PolicyDocument[]): PolicySet {
  return new PolicySet(compile(docs));
}
