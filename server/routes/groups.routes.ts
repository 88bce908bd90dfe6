import * as groups from '../../shared/permissions/group.service.ts';
import { GROUP_MESSAGES, GroupCreate, GroupListQuery, GroupRef, GroupUpdate, GroupView } from '../../shared/permissions/group.schemas.ts';
import * as permissions from '../../shared/permissions/permission.service.ts';
import { PermissionListQuery, PermissionRef, PermissionView } from '../../shared/permissions/permission.schemas.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import { alias } from './organizations.routes.ts';

const GROUPS = '/api/cloud/groups/';
const GROUP = '/api/cloud/groups/:id/';
const PERMISSIONS = '/api/cloud/permissions/';
const PERMISSION = '/api/cloud/permissions/:id/';

export function groupRoutes(publicUrl: string | undefined): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: GROUPS,
      aliases: alias(GROUPS),
      operationId: 'groups_list',
      summary: 'List groups',
      tags: ['groups'],
      auth: 'user',
      query: GroupListQuery,
      responses: { 200: paginated(GroupView) },
      async handler(ctx, { query }) {
        sendPage(ctx, await groups.listGroups(ctx.state.service(), query), publicUrl);
      },
    }),
    defineRoute({
      method: 'post',
      path: GROUPS,
      aliases: alias(GROUPS),
      operationId: 'groups_create',
      summary: 'Create a group',
      description: 'Superusers and staff.',
      tags: ['groups'],
      auth: 'user',
      body: GroupCreate,
      responses: { 201: created(GroupView) },
      async handler(ctx, { body }) {
        sendCreated(ctx, GROUP_MESSAGES.created, await groups.createGroup(ctx.state.service(), body));
      },
    }),
    defineRoute({
      method: 'get',
      path: GROUP,
      aliases: alias(GROUP),
      operationId: 'groups_retrieve',
      summary: 'Get a group',
      tags: ['groups'],
      auth: 'user',
      params: GroupRef,
      responses: { 200: GroupView },
      async handler(ctx, { params }) {
        ctx.body = await groups.getGroup(ctx.state.service(), params.id);
      },
    }),
    defineRoute({
      method: 'put',
      path: GROUP,
      aliases: alias(GROUP),
      operationId: 'groups_update',
      summary: 'Update a group',
      description: 'Superusers and staff. `permissions` replaces the whole set.',
      tags: ['groups'],
      auth: 'user',
      params: GroupRef,
      body: GroupUpdate,
      responses: { 200: GroupView },
      async handler(ctx, { params, body }) {
        ctx.body = await groups.updateGroup(ctx.state.service(), params.id, body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: GROUP,
      aliases: alias(GROUP),
      operationId: 'groups_destroy',
      summary: 'Delete a group',
      description: 'Superusers and staff. Members lose the group and the grants it held.',
      tags: ['groups'],
      auth: 'user',
      params: GroupRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await groups.deleteGroup(ctx.state.service(), params.id);
        sendMessage(ctx, GROUP_MESSAGES.deleted);
      },
    }),
    defineRoute({
      method: 'get',
      path: PERMISSIONS,
      aliases: alias(PERMISSIONS),
      operationId: 'permissions_list',
      summary: 'List permissions',
      tags: ['permissions'],
      auth: 'user',
      query: PermissionListQuery,
      responses: { 200: paginated(PermissionView) },
      async handler(ctx, { query }) {
        sendPage(ctx, await permissions.listPermissions(ctx.state.service(), query), publicUrl);
      },
    }),
    defineRoute({
      method: 'get',
      path: PERMISSION,
      aliases: alias(PERMISSION),
      operationId: 'permissions_retrieve',
      summary: 'Get a permission',
      tags: ['permissions'],
      auth: 'user',
      params: PermissionRef,
      responses: { 200: PermissionView },
      async handler(ctx, { params }) {
        ctx.body = await permissions.getPermission(ctx.state.service(), params.id);
      },
    }),
  ];
}
