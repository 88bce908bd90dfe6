// Authorization policies of an app and decisions on them (spec Part 2 §4, scope 'tenant'). Every
// route is served as `/api/apps/{app_slug}/…` on the site's host or under `/sites/{schema_name}/`
// on a platform host (host routing), and also as `/sites/{schema_name}/api/apps/{app_slug}/…` on
// the site's own host, where the schema must be that site's (another: 404). The tenant is always
// the host routing's, whose token binding (tenancy/tenant-auth.ts) refuses another site's token.
import type { TSchema } from '@sinclair/typebox';
import type { ServiceContext } from '../../shared/context.ts';
import { siteNotFound } from '../../shared/errors.ts';
import { POLICY_LIMITS } from '../../shared/policies/budget.ts';
import * as decisions from '../../shared/policies/decision.service.ts';
import {
  CheckBody, CheckResponseBody, DerivedRolesQuery, EvaluationBody, EvaluationResponse, EvaluationsBody, EvaluationsResponse, InspectQuery, InspectResponse,
  PlanBody, PlanResponseBody, PolicyBody, PolicyDeleteQuery, PolicyList, PolicyListQuery, PolicyParams, PrincipalQuery, SystemActionsResponse,
} from '../../shared/policies/policy.schemas.ts';
import * as policies from '../../shared/policies/policy.service.ts';
import { MessageBody } from '../http/envelopes.ts';
import { defineRoute, type Method, type RouteDef, type RouteInput } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const MANAGE = 'Site administrators (superusers and staff of the site).';
const DECIDE =
  `Any signed-in user of the site, about themselves; a principal in the body, \`username\` or \`email\` naming someone else is for site administrators (403 otherwise). Every resource is evaluated at the app's scope against the app's policies only. Attributes (principal and resources together) over ${POLICY_LIMITS.maxAttributeBytes / 1024} KiB as JSON: 413; an evaluation over its budget (value sizes, work, time): 422, nothing decided (docs/policies.md, "Limits").`;

interface Spec {
  method: Method;
  /** Under `/api/apps/:app_slug/`. */
  path: string;
  operationId: string;
  summary: string;
  description: string;
  query?: TSchema;
  body?: TSchema;
  responses: Record<number, TSchema | null>;
  handler: (ctx: AppContext, input: RouteInput) => Promise<void>;
}

/** The `/sites/{schema_name}/…` form on a site's host names that site, or nothing (404). */
function sameSite(ctx: AppContext, params: Record<string, string>): void {
  if (params.schema_name !== undefined && params.schema_name !== ctx.state.tenant) throw siteNotFound(params.schema_name);
}

function route(spec: Spec): RouteDef {
  return defineRoute({
    auth: 'user',
    scope: 'tenant',
    tags: ['policies'],
    method: spec.method,
    path: `/api/apps/:app_slug/${spec.path}`,
    aliases: [`/sites/:schema_name/api/apps/:app_slug/${spec.path}`],
    operationId: spec.operationId,
    summary: spec.summary,
    description: spec.description,
    params: PolicyParams,
    query: spec.query,
    body: spec.body,
    responses: spec.responses,
    async handler(ctx, input) {
      sameSite(ctx, input.params);
      await spec.handler(ctx, input);
    },
  });
}

/** A decision service: (context, app slug, body, query). */
type Decide = (ctx: ServiceContext, appSlug: string, body: unknown, query: unknown) => Promise<unknown>;

const list = (message: string, { data, total }: { data: unknown[]; total: number }) => ({ status: 'success', message, data, total });

export function policyRoutes(): RouteDef[] {
  const save = (method: 'post' | 'put'): Spec => ({
    method,
    path: 'policies/',
    operationId: method === 'post' ? 'policies_create' : 'policies_put',
    summary: method === 'post' ? 'Create a resource or derived-role policy' : 'Create or replace any policy of the app',
    description: `${
      method === 'post'
        ? 'Resource and derived-role policies only; role and principal policies and the system entity types (datatable, function, storage, query) are refused (400: use PUT). Creates or replaces.'
        : 'Relaxed: also role and principal policies and the system entity types. Idempotent (the same body stores the same policy).'
    } The body is a Cerbos-form document, the portable form, or {policies: [...]}. The scope is the app's (another: 400); the service sets created_by, created_date, modified_by, modified_date (given: 400). Nothing is stored unless the app's resulting policy set compiles (400 naming each problem). ${MANAGE}`,
    body: PolicyBody,
    responses: { [method === 'post' ? 201 : 200]: MessageBody },
    async handler(ctx, { params, body }) {
      const { message } = await policies.savePolicies(ctx.state.service(), params.app_slug!, body, method === 'post' ? 'create' : 'put');
      ctx.status = method === 'post' ? 201 : 200;
      ctx.body = { status: 'success', message };
    },
  });
  const decide = (path: string, operationId: string, summary: string, body: TSchema, response: TSchema, call: Decide, withQuery = true): Spec => ({
    method: 'post',
    path,
    operationId,
    summary,
    description: DECIDE,
    query: withQuery ? PrincipalQuery : undefined,
    body,
    responses: { 200: response },
    async handler(ctx, { params, body: b, query }) {
      ctx.body = await call(ctx.state.service(), params.app_slug!, b, query);
    },
  });
  const specs: Spec[] = [
    save('post'),
    save('put'),
    {
      method: 'get',
      path: 'policies/',
      operationId: 'policies_list',
      summary: 'List the app\'s policies, or get some by id',
      description: `Filters are RE2 regular expressions (linear time; a bad one: 400). Only the app's own policies are ever listed; the service's unscoped ancestors are not. With \`id\` (repeatable), exactly those (404 naming a missing one), disabled ones included. ${MANAGE}`,
      query: PolicyListQuery,
      responses: { 200: PolicyList },
      async handler(ctx, { params, query }) {
        ctx.body = list(policies.POLICY_MESSAGES.listed, await policies.listPolicies(ctx.state.service(), params.app_slug!, query));
      },
    },
    {
      method: 'delete',
      path: 'policies/',
      operationId: 'policies_destroy',
      summary: 'Soft-delete policies (disabled, kept)',
      description: `Disabled policies leave the compiled set and are listed only with include_disabled. Refused (400) when the remaining policies would not compile (a derived-role set still imported). ${MANAGE}`,
      query: PolicyDeleteQuery,
      responses: { 200: MessageBody },
      async handler(ctx, { params, query }) {
        ctx.body = { status: 'success', message: await policies.deletePolicies(ctx.state.service(), params.app_slug!, query) };
      },
    },
    {
      method: 'get',
      path: 'policies/derived-roles/',
      operationId: 'policies_derived_roles',
      summary: 'List the app\'s derived-role sets',
      description: `Names are stored with the prefix {schema}_{app_slug}_; name_regexp matches the name without it. ${MANAGE}`,
      query: DerivedRolesQuery,
      responses: { 200: PolicyList },
      async handler(ctx, { params, query }) {
        ctx.body = list(policies.POLICY_MESSAGES.derivedRolesListed, await policies.listDerivedRoles(ctx.state.service(), params.app_slug!, query));
      },
    },
    {
      method: 'get',
      path: 'policies/inspect/',
      operationId: 'policies_inspect',
      summary: 'Inspect the app\'s compiled policies',
      description: `Per policy id: actions, derived roles, variables, constants and attributes, from the compiled set. ${MANAGE}`,
      query: InspectQuery,
      responses: { 200: InspectResponse },
      async handler(ctx, { params, query }) {
        const results = await policies.inspectPolicies(ctx.state.service(), params.app_slug!, query);
        ctx.body = { success: true, message: policies.POLICY_MESSAGES.inspected, status_code: 200, data: { results } };
      },
    },
    decide('check/resources', 'check_resources', 'Check actions on resources (Cerbos CheckResources)', CheckBody, CheckResponseBody, decisions.checkResources),
    decide('plan/resources', 'plan_resources', 'Plan which resources of a kind allow an action (Cerbos PlanResources)', PlanBody, PlanResponseBody, decisions.planResources),
    decide('access/v1/evaluation', 'access_evaluation', 'AuthZEN access evaluation', EvaluationBody, EvaluationResponse, decisions.evaluation, false),
    decide('access/v1/evaluations', 'access_evaluations', 'AuthZEN access evaluations (batch)', EvaluationsBody, EvaluationsResponse, decisions.evaluations, false),
    {
      method: 'get',
      path: 'authorization/system-action/',
      operationId: 'system_actions',
      summary: 'The actions of the system entity types',
      description: 'datatable, function, storage and query, each with its actions. Any signed-in user of the site.',
      responses: { 200: SystemActionsResponse },
      async handler(ctx, { params }) {
        ctx.body = { success: true, data: await decisions.systemActions(ctx.state.service(), params.app_slug!) };
      },
    },
  ];
  return specs.map(route);
}
