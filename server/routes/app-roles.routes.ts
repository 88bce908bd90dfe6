// Roles of an app and who holds them (scope 'tenant': a site host or /sites/{schema}/…).
// Roles: read by any signed-in user of the site, written by its administrators; assignments:
// the administrators' only; `roles/mine/`: the caller's own roles as the policies see them.
// docs/app-roles.md.
import {
  APP_ROLE_MESSAGES, AppRoleAppRef, AppRoleAssign, AppRoleAssignmentListQuery, AppRoleAssignmentRef, AppRoleAssignmentView, AppRoleCreate,
  AppRoleListQuery, AppRoleRef, AppRoleUpdate, AppRoleView, MyAppRoles,
} from '../../shared/apps/app-roles.schemas.ts';
import * as roles from '../../shared/apps/app-roles.service.ts';
import { createdBody } from '../../shared/common/envelopes.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

const READ = 'Any signed-in user of the site.';
const ADMINS = 'Site administrators (superusers and staff of the site).';
const ROLES = '/api/apps/:app_slug/roles/';
const ROLE = '/api/apps/:app_slug/roles/:name/';
const ASSIGNMENTS = '/api/apps/:app_slug/roles/:name/assignments/';
const ASSIGNMENT = '/api/apps/:app_slug/roles/:name/assignments/:user_uuid/';

export function appRoleRoutes(publicUrl: string | undefined): RouteDef[] {
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: ['app roles'] };
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: ROLES,
      operationId: 'app_roles_list',
      summary: 'List the roles of an app',
      description: `Each role with its parent's name. ${READ}`,
      params: AppRoleAppRef,
      query: AppRoleListQuery,
      responses: { 200: paginated(AppRoleView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await roles.listRoles(ctx.state.service(), params.app_slug, query), publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: ROLES,
      operationId: 'app_roles_create',
      summary: 'Create a role in an app',
      description: `\`name\` is unique in the app; \`admin\`, \`user\` and \`mine\` are reserved. \`parent_name\` names a role of the same app. ${ADMINS}`,
      params: AppRoleAppRef,
      body: AppRoleCreate,
      responses: { 201: created(AppRoleView) },
      async handler(ctx, { params, body }) {
        sendCreated(ctx, APP_ROLE_MESSAGES.created, await roles.createRole(ctx.state.service(), params.app_slug, body));
      },
    }),
    // Before `roles/{name}/` (which it would otherwise be): `mine` is a reserved role name.
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/roles/mine/',
      operationId: 'app_roles_mine',
      summary: 'The caller\'s own roles in an app',
      description: `What the policies see: assigned roles with their ancestors, \`admin\` for site administrators, \`user\` when no other applies. ${READ}`,
      params: AppRoleAppRef,
      responses: { 200: MyAppRoles },
      async handler(ctx, { params }) {
        ctx.body = { data: await roles.myRoles(ctx.state.service(), params.app_slug) };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: ROLE,
      operationId: 'app_roles_retrieve',
      summary: 'Get a role of an app',
      description: READ,
      params: AppRoleRef,
      responses: { 200: AppRoleView },
      async handler(ctx, { params }) {
        ctx.body = await roles.getRole(ctx.state.service(), params.app_slug, params.name);
      },
    }),
    ...(['put', 'patch'] as const).map((method) =>
      defineRoute({
        ...base,
        method,
        path: ROLE,
        operationId: method === 'put' ? 'app_roles_update' : 'app_roles_partial_update',
        summary: 'Update a role of an app',
        description: `Fields left out keep their values; \`parent_name: null\` removes the parent; a parent that is the role itself or one of its descendants is refused (400). A renamed role keeps its assignments. ${ADMINS}`,
        params: AppRoleRef,
        body: AppRoleUpdate,
        responses: { 200: AppRoleView },
        async handler(ctx, { params, body }) {
          ctx.body = await roles.updateRole(ctx.state.service(), params.app_slug, params.name, body);
        },
      }),
    ),
    defineRoute({
      ...base,
      method: 'delete',
      path: ROLE,
      operationId: 'app_roles_destroy',
      summary: 'Delete a role of an app',
      description: `Its assignments go with it; its child roles stay, without a parent. ${ADMINS}`,
      params: AppRoleRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await roles.deleteRole(ctx.state.service(), params.app_slug, params.name);
        sendMessage(ctx, APP_ROLE_MESSAGES.deleted(params.name));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: ASSIGNMENTS,
      operationId: 'app_role_assignments_list',
      summary: 'List the users holding a role',
      description: `Direct assignments only (holders of a child role hold this one too, through it). ${ADMINS}`,
      params: AppRoleRef,
      query: AppRoleAssignmentListQuery,
      responses: { 200: paginated(AppRoleAssignmentView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await roles.listAssignments(ctx.state.service(), params.app_slug, params.name, query), publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: ASSIGNMENTS,
      operationId: 'app_role_assignments_create',
      summary: 'Assign a role to a site user',
      description: `\`user\`: a UUID or a username; 404 for an unknown (or deleted) user. Idempotent: 201 when assigned now, 200 when the user held it already. ${ADMINS}`,
      params: AppRoleRef,
      body: AppRoleAssign,
      responses: { 201: created(AppRoleAssignmentView), 200: created(AppRoleAssignmentView) },
      async handler(ctx, { params, body }) {
        const { created: isNew, assignment } = await roles.assignRole(ctx.state.service(), params.app_slug, params.name, body);
        if (isNew) sendCreated(ctx, APP_ROLE_MESSAGES.assigned, assignment);
        else ctx.body = createdBody(APP_ROLE_MESSAGES.alreadyAssigned, assignment);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: ASSIGNMENT,
      operationId: 'app_role_assignments_destroy',
      summary: 'Take a role from a site user',
      description: `404 when the user does not hold the role. ${ADMINS}`,
      params: AppRoleAssignmentRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await roles.unassignRole(ctx.state.service(), params.app_slug, params.name, params.user_uuid);
        sendMessage(ctx, APP_ROLE_MESSAGES.unassigned);
      },
    }),
  ];
}
