// Decisions on an app's policies (spec Part 2 §4): CheckResources, PlanResources and AuthZEN
// evaluations, against the app's compiled set only (hook.ts loadPolicySet: its policies and the
// unscoped ancestors they need), every resource at the app's scope.
//
// Who a decision is about (principal resolution, first match wins): a principal in the body, the
// query's `username`, its `email`, else the caller (principal.ts principalFor). Any signed-in user
// of the site may ask about themselves; naming someone else is for the site's administrators
// (`manage` on the App), anyone else gets 403. A non-administrator's principal is always the
// stored one (roles and attributes from the database), whatever the body says of it.
import { randomUUID } from 'node:crypto';
import { allows, type UserActor } from '../auth/actor.ts';
import { activeAppFor, type ActiveApp } from '../apps/lookup.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { firstRow } from '../db/sql.ts';
import { DomainError, fieldError, notFound, permissionDenied } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { siteSchemaFor } from '../tenancy/site-access.ts';
import { POLICY_LIMITS } from './budget.ts';
import type { CheckRequest, CheckResponse, Principal } from './model.ts';
import {
  CheckBody, EvaluationBody, EvaluationsBody, PlanBody, PrincipalQuery, type AuthzenEntity, type PrincipalBody,
} from './policy.schemas.ts';
import { appScope, principalFor, type PrincipalUser } from './principal.ts';
import { loadPolicySet, requestPrincipal } from './hook.ts';
import type { PolicySet } from './engine.ts';

/** The actions of the system entity types (spec Part 2 §2 "System actions"). */
export const SYSTEM_ACTIONS: Readonly<Record<string, readonly string[]>> = {
  datatable: ['create', 'read', 'update', 'delete', 'materialize'],
  function: ['create', 'read', 'update', 'delete', 'execute'],
  storage: ['create', 'read', 'update', 'delete', 'upload', 'download'],
  query: ['create', 'read', 'update', 'delete', 'execute'],
};

interface Decider {
  schema: string;
  app: ActiveApp;
  scope: string;
  /** The caller administers the site: may name any principal. */
  admin: boolean;
}

/** The app a decision is asked of: any signed-in user of the site reads it (404 for an unknown app). */
async function decider(ctx: ServiceContext, appSlug: string): Promise<Decider> {
  const schema = await siteSchemaFor(ctx, 'read', 'App');
  const app = await activeAppFor(ctx, schema, appSlug, 'read');
  return { schema, app, scope: appScope(schema, app.slug), admin: allows(ctx.ability, 'manage', 'App', { schema, slug: app.slug }) };
}

/** The system actions map (GET authorization/system-action/), once the app is known to exist. */
export async function systemActions(ctx: ServiceContext, appSlug: string): Promise<Record<string, readonly string[]>> {
  await decider(ctx, appSlug);
  return SYSTEM_ACTIONS;
}

/** The app's scope for a resource or principal: absent or the app's; another is a 400 naming `field`. */
function scopeIn(d: Decider, given: unknown, field: string): string {
  if (given === undefined || given === d.scope) return d.scope;
  throw fieldError(field, `Decisions in this app are made at its scope "${d.scope}".`);
}

/** The signed-in caller as a site user (the system actor is no principal: 400). */
function caller(ctx: ServiceContext): UserActor {
  if (ctx.actor.kind !== 'user') throw new DomainError('BAD_REQUEST', 'The system actor is no principal: give a principal, `username` or `email`.');
  return ctx.actor;
}

/** The site user named by username or e-mail (case-insensitive, not deleted); a non-administrator finds only themselves. */
async function siteUser(ctx: ServiceContext, d: Decider, by: 'username' | 'email', value: string): Promise<PrincipalUser> {
  const onlySelf = d.admin ? null : caller(ctx).uuid;
  const user = await firstRow<PrincipalUser>(
    ctx.em,
    `SELECT uuid, is_superuser, is_staff FROM ${quotedSchema(d.schema)}.users
      WHERE lower(${by}) = lower(?) AND NOT is_deleted${by === 'email' ? " AND email <> ''" : ''}${onlySelf ? ' AND uuid = ?' : ''}`,
    onlySelf ? [value, onlySelf] : [value],
  );
  if (!user && !d.admin) throw permissionDenied();
  if (!user) throw notFound({ message: `No user with ${by === 'username' ? 'username' : 'e-mail'} "${value}" in this site.` });
  return user;
}

const stored = (ctx: ServiceContext, d: Decider, user: PrincipalUser): Promise<Principal> => principalFor(ctx.em, d.schema, d.app, user);

/** The caller's own principal (cached per process with the policies: hook.ts). */
async function own(ctx: ServiceContext, d: Decider): Promise<Principal> {
  caller(ctx);
  return (await requestPrincipal(ctx, d.schema, d.app))!;
}

/** A principal an administrator gave: as given, at the app's scope, with `tenant_id` and `app_slug` unless given. */
function given(d: Decider, p: PrincipalBody, field: string): Principal {
  return { ...p, attr: { tenant_id: d.schema, app_slug: d.app.slug, ...p.attr }, scope: scopeIn(d, p.scope, `${field}.scope`) };
}

/** Principal resolution for check and plan (spec §4): body principal, `username`, `email`, the caller. */
async function resolvePrincipal(ctx: ServiceContext, d: Decider, body: PrincipalBody | undefined, rawQuery: unknown): Promise<Principal> {
  const query = validate(PrincipalQuery, rawQuery ?? {}, 'query');
  if (body) {
    if (d.admin) return given(d, body, 'principal');
    const self = caller(ctx);
    if (body.id !== self.uuid) throw permissionDenied();
    return own(ctx, d);
  }
  if (query.username !== undefined) return stored(ctx, d, await siteUser(ctx, d, 'username', query.username));
  if (query.email !== undefined) return stored(ctx, d, await siteUser(ctx, d, 'email', query.email));
  return own(ctx, d);
}

/**
 * 413 when the attributes a request gives (principal and resources, or AuthZEN properties) take
 * more than POLICY_LIMITS.maxAttributeBytes as JSON: the inputs of the evaluation's budget.
 */
function limitAttributes(attributes: unknown[]): void {
  let bytes = 0;
  for (const a of attributes) if (a !== undefined) bytes += Buffer.byteLength(JSON.stringify(a));
  const max = POLICY_LIMITS.maxAttributeBytes;
  if (bytes > max) {
    throw new DomainError('PAYLOAD_TOO_LARGE', `The attributes of this request take ${bytes} bytes as JSON: a decision takes at most ${max} bytes of attributes (principal and resources together).`, {
      data: { limit: 'maxAttributeBytes', value: max },
    });
  }
}

/** POST check/resources: each action of each resource allowed or denied, with the derived roles in effect. */
export async function checkResources(ctx: ServiceContext, appSlug: string, rawBody: unknown, rawQuery: unknown = {}) {
  const d = await decider(ctx, appSlug);
  const body = validate(CheckBody, rawBody);
  limitAttributes([body.principal?.attr, ...body.resources.map((r) => r.resource.attr)]);
  const resources = body.resources.map(({ resource: r, actions }, i) => ({
    resource: { kind: r.kind, id: r.id, attr: r.attr ?? {}, scope: scopeIn(d, r.scope, `resources.${i}.resource.scope`), policyVersion: r.policyVersion ?? r.policy_version ?? 'default' },
    actions,
  }));
  const principal = await resolvePrincipal(ctx, d, body.principal, rawQuery);
  const set = await loadPolicySet(ctx, d.schema, d.app);
  const res = set.check({ requestId: body.requestId ?? randomUUID(), includeMeta: true, principal, resources });
  return {
    requestId: res.requestId,
    results: res.results.map((r, i) => ({
      resource: { id: resources[i]!.resource.id, kind: resources[i]!.resource.kind, policyVersion: resources[i]!.resource.policyVersion, scope: d.scope },
      actions: r.actions,
      meta: { effectiveDerivedRoles: r.meta?.effectiveDerivedRoles ?? [], ...(body.includeMeta ? { actions: r.meta?.actions ?? {} } : {}) },
      ...(r.outputs?.length ? { outputs: r.outputs } : {}),
    })),
  };
}

const FILTER_KINDS = { KIND_ALWAYS_ALLOWED: 'ALWAYS_ALLOWED', KIND_ALWAYS_DENIED: 'ALWAYS_DENIED', KIND_CONDITIONAL: 'CONDITIONAL' } as const;

/** POST plan/resources: for which resources of a kind the principal may do the action (always, never, or a condition on their attributes). */
export async function planResources(ctx: ServiceContext, appSlug: string, rawBody: unknown, rawQuery: unknown = {}) {
  const d = await decider(ctx, appSlug);
  const body = validate(PlanBody, rawBody);
  limitAttributes([body.principal?.attr, body.resource.attr]);
  if (body.action === undefined && body.actions === undefined) throw fieldError('action', 'This field is required.');
  if (body.action !== undefined && body.actions !== undefined) throw fieldError('actions', 'Give action or actions, not both.');
  const r = body.resource;
  const policyVersion = r.policy_version ?? r.policyVersion ?? body.policy_version ?? 'default';
  const resource = { kind: r.kind, scope: scopeIn(d, r.scope, 'resource.scope'), policyVersion, attr: r.attr ?? {} };
  const principal = await resolvePrincipal(ctx, d, body.principal, rawQuery);
  const set = await loadPolicySet(ctx, d.schema, d.app);
  const res = set.plan({ requestId: body.requestId ?? randomUUID(), action: body.action, actions: body.actions, principal, resource });
  return {
    requestId: res.requestId,
    ...(body.action !== undefined ? { action: body.action } : { actions: body.actions }),
    resource_kind: r.kind,
    policy_version: policyVersion,
    filter_kind: FILTER_KINDS[res.filter.kind],
    ...(res.filter.kind === 'KIND_CONDITIONAL' && res.filter.condition ? { condition: res.filter.condition } : {}),
  };
}

// ---- AuthZEN (CERBOS-NOTES §7; our response context is {id, reason_admin}) ----

const ROLES_PROPERTY = 'cerbos.roles';
const SCOPE_PROPERTY = 'cerbos.scope';
const VERSION_PROPERTY = 'cerbos.policyVersion';

type Evaluation = { subject: AuthzenEntity; resource: AuthzenEntity; action: { name: string }; context?: Record<string, unknown> };
type Decision = { decision: boolean; context: { id: string; reason_admin: { effectiveDerivedRoles: string[] } } };

/** An AuthZEN subject as a principal: an administrator's as given (roles from `cerbos.roles`, else the subject's type); anyone else's, their own stored one. */
async function subjectPrincipal(ctx: ServiceContext, d: Decider, subject: AuthzenEntity, field: string, ownPrincipal: () => Promise<Principal>): Promise<Principal> {
  if (!d.admin) {
    if (subject.id !== caller(ctx).uuid) throw permissionDenied();
    return ownPrincipal();
  }
  const props = subject.properties ?? {};
  const roles = props[ROLES_PROPERTY];
  if (roles !== undefined && (!Array.isArray(roles) || !roles.length || !roles.every((x) => typeof x === 'string' && x))) {
    throw fieldError(`${field}.properties.${ROLES_PROPERTY}`, 'A non-empty list of role names is required.');
  }
  const version = props[VERSION_PROPERTY];
  return {
    id: subject.id,
    roles: roles ? [...new Set(roles as string[])] : [subject.type],
    attr: { tenant_id: d.schema, app_slug: d.app.slug, ...props },
    scope: scopeIn(d, props[SCOPE_PROPERTY], `${field}.properties.${SCOPE_PROPERTY}`),
    ...(typeof version === 'string' ? { policyVersion: version } : {}),
  };
}

/** Evaluations against one compiled set, under one budget; the caller's own principal is read once. */
async function evaluateAll(ctx: ServiceContext, d: Decider, evaluations: { value: Evaluation; field: string }[], semantic: string): Promise<Decision[]> {
  const set: PolicySet = await loadPolicySet(ctx, d.schema, d.app);
  let mine: Promise<Principal> | undefined;
  const ownOnce = () => (mine ??= own(ctx, d));
  const requests: CheckRequest[] = [];
  for (const { value: e, field } of evaluations) {
    const principal = await subjectPrincipal(ctx, d, e.subject, `${field}subject`, ownOnce);
    const props = e.resource.properties ?? {};
    const version = props[VERSION_PROPERTY];
    const request: CheckRequest = {
      requestId: typeof e.context?.['cerbos.requestId'] === 'string' ? (e.context['cerbos.requestId'] as string) : randomUUID(),
      includeMeta: true,
      principal,
      resources: [{
        resource: {
          kind: e.resource.type,
          id: e.resource.id,
          attr: props,
          scope: scopeIn(d, props[SCOPE_PROPERTY], `${field}resource.properties.${SCOPE_PROPERTY}`),
          policyVersion: typeof version === 'string' ? version : 'default',
        },
        actions: [e.action.name],
      }],
    };
    requests.push(request);
  }
  const allowed = (res: CheckResponse) => Object.values(res.results[0]!.actions)[0] === 'EFFECT_ALLOW';
  const stop = (res: CheckResponse) => (semantic === 'deny_on_first_deny' && !allowed(res)) || (semantic === 'permit_on_first_permit' && allowed(res));
  return set.checkEach(requests, stop).map((res) => ({
    decision: allowed(res),
    context: { id: res.requestId, reason_admin: { effectiveDerivedRoles: res.results[0]!.meta?.effectiveDerivedRoles ?? [] } },
  }));
}

/** POST access/v1/evaluation. */
export async function evaluation(ctx: ServiceContext, appSlug: string, rawBody: unknown): Promise<Decision> {
  const d = await decider(ctx, appSlug);
  const body = validate(EvaluationBody, rawBody);
  limitAttributes([body.subject.properties, body.resource.properties]);
  return (await evaluateAll(ctx, d, [{ value: body, field: '' }], 'execute_all'))[0]!;
}

/** POST access/v1/evaluations: each evaluation overrides the defaults; `options.evaluations_semantic` may stop at the first deny or permit. */
export async function evaluations(ctx: ServiceContext, appSlug: string, rawBody: unknown): Promise<{ evaluations: Decision[] }> {
  const d = await decider(ctx, appSlug);
  const body = validate(EvaluationsBody, rawBody);
  limitAttributes([body.subject, body.resource, ...(body.evaluations ?? []).flatMap((e) => [e.subject, e.resource])].map((x) => x?.properties));
  const items = body.evaluations?.length ? body.evaluations : [{}];
  const merged = items.map((item, i) => {
    const field = body.evaluations?.length ? `evaluations.${i}.` : '';
    const value = { subject: item.subject ?? body.subject, resource: item.resource ?? body.resource, action: item.action ?? body.action, context: item.context ?? body.context };
    for (const key of ['subject', 'resource', 'action'] as const) if (!value[key]) throw fieldError(`${field}${key}`, 'This field is required (here or as the default).');
    return { value: value as Evaluation, field };
  });
  return { evaluations: await evaluateAll(ctx, d, merged, body.options?.evaluations_semantic ?? 'execute_all') };
}
