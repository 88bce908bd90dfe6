// The one authorization hook of app resources (data tables and records today; storage, functions
// and queries later): `authorize(ctx, …)` decides one action on one resource, `planFor(ctx, …)`
// gives the formula of the rows an action may reach. Both sit on the request's ability: the CASL
// rules decide who may act in the site at all (tenant isolation, site administration); the app's
// policies decide what a site user may do to the app's resources. The system actor (operators,
// the CLI's direct mode without --as) is above policies, as it is above the CASL rules.
//
// Compiled policy sets, principals and plans live in the process's caches (request-caches.ts),
// dropped across processes on every change to policies, roles, assignments or a user
// (LISTEN/NOTIFY topics `policies` and `auth`); plans expire after 5 minutes (spec Part 2 §8).
import type { ServiceContext } from '../context.ts';
import { readsOf } from '../context.ts';
import { permissionDenied } from '../errors.ts';
import { compilePolicies, type Formula, type PolicySet } from './engine.ts';
import type { Principal } from './model.ts';
import { loadAppPolicies } from './store.ts';
import { appScope, principalFor } from './principal.ts';

export interface PolicyApp {
  id: number;
  slug: string;
}

/**
 * An app's enabled policies and the unscoped ancestors they need, compiled: the one loader of the
 * engine's sets (the policy API's too). Stored policies were validated when written; a set that
 * no longer compiles (an engine upgrade) is a 500 whose log names the problems.
 */
export async function loadPolicySet(ctx: ServiceContext, schema: string, app: PolicyApp): Promise<PolicySet> {
  const load = async () => compilePolicies(await loadAppPolicies(readsOf(ctx), schema, app));
  return ctx.caches ? ctx.caches.policies.get(`${schema}|${app.id}`, load) : load();
}

/** The acting site user as a principal of `app` (null for the system actor). */
export async function requestPrincipal(ctx: ServiceContext, schema: string, app: PolicyApp): Promise<Principal | null> {
  const actor = ctx.actor;
  if (actor.kind === 'system') return null;
  if (actor.tenant !== schema) throw permissionDenied(); // a platform user or another site's user holds no app roles here
  const load = () => principalFor(readsOf(ctx), schema, app, actor);
  return ctx.caches ? ctx.caches.principals.get(`${schema}|${app.id}|${actor.uuid}`, load) : load();
}

const kindScope = (schema: string, app: PolicyApp, kind: string) => ({ kind, scope: appScope(schema, app.slug) });

/** Whether the actor may `action` each resource (same order); the system actor may everything. */
export async function decide(ctx: ServiceContext, schema: string, app: PolicyApp, kind: string, action: string, resources: { id: string; attr: Record<string, unknown> }[]): Promise<boolean[]> {
  const principal = await requestPrincipal(ctx, schema, app);
  if (!principal) return resources.map(() => true);
  const set = await loadPolicySet(ctx, schema, app);
  const { scope } = kindScope(schema, app, kind);
  const res = set.check({ principal, resources: resources.map((r) => ({ resource: { kind, id: r.id, attr: r.attr, scope }, actions: [action] })) });
  return res.results.map((r) => r.actions[action] === 'EFFECT_ALLOW');
}

/** 403 (Part 1 §5's text) unless the actor may `action` every one of `resources` (all or nothing). */
export async function authorize(ctx: ServiceContext, schema: string, app: PolicyApp, kind: string, action: string, ...resources: { id: string; attr: Record<string, unknown> }[]): Promise<void> {
  if ((await decide(ctx, schema, app, kind, action, resources)).some((ok) => !ok)) throw permissionDenied();
}

/** The formula of the resources of `kind` the actor may `action` (true: all; false: none). */
export async function planFor(ctx: ServiceContext, schema: string, app: PolicyApp, kind: string, action: string): Promise<Formula> {
  const principal = await requestPrincipal(ctx, schema, app);
  if (!principal) return true;
  const plan = async () => (await loadPolicySet(ctx, schema, app)).formula(principal, kindScope(schema, app, kind), action);
  if (!ctx.caches) return plan();
  let who = principalKeys.get(principal);
  if (who === undefined) principalKeys.set(principal, (who = `${principal.id}|${principal.roles.join(',')}|${JSON.stringify(principal.attr)}`));
  return ctx.caches.plans.get(`${schema}|${app.id}|${kind}|${action}|${who}`, plan);
}

/** A principal's part of its plans' keys, made once per principal object (the principals cache keeps it across requests). */
const principalKeys = new WeakMap<Principal, string>();
