// A site's own users (scope 'tenant'). `/api/users/` is also the platform's alias of
// `/api/cloud/users/`: the registry serves the def whose scope matches the host.
import * as siteUsers from '../../shared/tenancy/tenant-users.service.ts';
import { PublicProfile, SiteUserCreate, SiteUserListQuery, SiteUserUpdate, SiteUserView, UserRef } from '../../shared/tenancy/tenant-users.schemas.ts';
import { USER_MESSAGES } from '../../shared/users/user.messages.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

const ADMINS = 'Site administrators only (the site\'s superusers and staff); staff cannot change superusers nor grant `is_staff`/`is_superuser`.';

export function tenantUserRoutes(publicUrl: string | undefined): RouteDef[] {
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: ['site users'] };
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/users/',
      operationId: 'site_users_list',
      summary: 'List the site\'s users',
      description: `${ADMINS} Deleted users are hidden unless \`is_deleted\` says otherwise.`,
      query: SiteUserListQuery,
      responses: { 200: paginated(SiteUserView) },
      async handler(ctx, { query }) {
        sendPage(ctx, await siteUsers.listSiteUsers(ctx.state.service(), query), publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/users/',
      operationId: 'site_users_create',
      summary: 'Create a site user (with a password of their own)',
      description: ADMINS,
      body: SiteUserCreate,
      responses: { 201: created(SiteUserView) },
      async handler(ctx, { body }) {
        sendCreated(ctx, USER_MESSAGES.created, await siteUsers.createSiteUser(ctx.state.service(), body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/users/:user/',
      operationId: 'site_users_retrieve',
      summary: 'Get a site user by username or UUID',
      description: ADMINS,
      params: UserRef,
      responses: { 200: SiteUserView },
      async handler(ctx, { params }) {
        ctx.body = await siteUsers.getSiteUser(ctx.state.service(), params.user);
      },
    }),
    defineRoute({
      ...base,
      method: 'put',
      path: '/api/users/:user/',
      operationId: 'site_users_update',
      summary: 'Update a site user',
      description: `${ADMINS} A user linked to a platform account has no password here (400 on \`password\`). Setting \`password\` or \`is_active: false\` revokes the user's tokens.`,
      params: UserRef,
      body: SiteUserUpdate,
      responses: { 200: SiteUserView },
      async handler(ctx, { params, body }) {
        ctx.body = await siteUsers.updateSiteUser(ctx.state.service(), params.user, body);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api/users/:user/',
      operationId: 'site_users_destroy',
      summary: 'Delete a site user (soft)',
      description: ADMINS,
      params: UserRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await siteUsers.deleteSiteUser(ctx.state.service(), params.user);
        sendMessage(ctx, USER_MESSAGES.deleted);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/users/:user/profile/',
      operationId: 'site_users_profile',
      summary: 'Public profile of a site user',
      description: 'Any signed-in user of the site; username or UUID. Public fields only.',
      params: UserRef,
      responses: { 200: PublicProfile },
      async handler(ctx, { params }) {
        ctx.body = await siteUsers.getPublicProfile(ctx.state.service(), params.user);
      },
    }),
  ];
}
