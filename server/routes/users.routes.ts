import { Type } from '@sinclair/typebox';
import type { Config } from '../../shared/config.ts';
import type { Mailer } from '../../shared/mail/mailer.ts';
import * as siteUsers from '../../shared/tenancy/tenant-users.service.ts';
import { SiteProfileUpdate, SiteUserView } from '../../shared/tenancy/tenant-users.schemas.ts';
import { confirmEmailChange, EMAIL_MESSAGES, EmailToken } from '../../shared/users/email-change.ts';
import { USER_MESSAGES } from '../../shared/users/user.messages.ts';
import * as users from '../../shared/users/user.service.ts';
import { ChangePassword, ProfileUpdate, UserCreate, UserListQuery, UserRef, UserUpdate, UserView } from '../../shared/users/user.schemas.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import { mailLinks } from '../http/mail-links.ts';

const EMAIL_NOTE = ' A new e-mail address of your own takes effect when the confirmation link mailed to it is used (`pending_email` shows it meanwhile).';

export function userRoutes(config: Config, mailer: Mailer): RouteDef[] {
  const publicUrl = config.publicUrl;
  const mail = mailLinks(config, mailer);
  return [
    defineRoute({
      method: 'get',
      path: '/api/cloud/users/',
      aliases: ['/api/users/'],
      operationId: 'users_list',
      summary: 'List users',
      description: 'Staff and superusers see every user; other users see themselves. Deleted users are hidden unless `is_deleted` says otherwise.',
      tags: ['users'],
      auth: 'user',
      query: UserListQuery,
      responses: { 200: paginated(UserView) },
      async handler(ctx, { query }) {
        sendPage(ctx, await users.listUsers(ctx.state.service(), query), publicUrl);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/cloud/users/',
      aliases: ['/api/users/'],
      operationId: 'users_create',
      summary: 'Create a user',
      tags: ['users'],
      auth: 'user',
      body: UserCreate,
      responses: { 201: created(UserView) },
      async handler(ctx, { body }) {
        sendCreated(ctx, USER_MESSAGES.created, await users.createUser(ctx.state.service(), body));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/cloud/users/:user/',
      aliases: ['/api/users/:user/'],
      operationId: 'users_retrieve',
      summary: 'Get a user by username or UUID',
      tags: ['users'],
      auth: 'user',
      params: UserRef,
      responses: { 200: UserView },
      async handler(ctx, { params }) {
        ctx.body = await users.getUser(ctx.state.service(), params.user);
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/cloud/users/:user/',
      aliases: ['/api/users/:user/'],
      operationId: 'users_update',
      summary: 'Update a user',
      description:
        'Fields left out keep their values; a body sent back from GET works (read-only fields unchanged are ignored). Setting `password` (with `old_password` for your own) or `is_active: false` revokes the user\'s tokens; `is_deleted: false` restores a deleted user (superusers).' +
        EMAIL_NOTE,
      tags: ['users'],
      auth: 'user',
      params: UserRef,
      body: UserUpdate,
      responses: { 200: UserView },
      async handler(ctx, { params, body }) {
        ctx.body = await users.updateUser(ctx.state.service(), params.user, body, mail(ctx));
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/cloud/users/:user/',
      aliases: ['/api/users/:user/'],
      operationId: 'users_destroy',
      summary: 'Delete a user (soft)',
      description: 'Sets `is_deleted` true and `is_active` false; the user can no longer log in or refresh a token.',
      tags: ['users'],
      auth: 'user',
      params: UserRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await users.deleteUser(ctx.state.service(), params.user);
        sendMessage(ctx, USER_MESSAGES.deleted);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/profile/',
      operationId: 'profile_retrieve',
      summary: 'The current user',
      description: 'On a site host, the site user (with `platform_user_uuid`).',
      tags: ['profile'],
      auth: 'user',
      scope: 'both',
      responses: { 200: Type.Union([UserView, SiteUserView]) },
      async handler(ctx) {
        const service = ctx.state.service();
        ctx.body = service.tenant ? await siteUsers.getSiteProfile(service) : await users.getProfile(service);
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/profile/',
      operationId: 'profile_update',
      summary: 'Update the current user',
      description: `A body sent back from GET works (read-only fields unchanged are ignored).${EMAIL_NOTE}`,
      tags: ['profile'],
      auth: 'user',
      body: ProfileUpdate,
      responses: { 200: UserView },
      async handler(ctx, { body }) {
        ctx.body = await users.updateProfile(ctx.state.service(), body, mail(ctx));
      },
    }),
    defineRoute({
      method: 'put',
      path: '/api/profile/',
      operationId: 'site_profile_update',
      summary: 'Update the current site user',
      tags: ['profile'],
      auth: 'user',
      scope: 'tenant',
      body: SiteProfileUpdate,
      responses: { 200: SiteUserView },
      async handler(ctx, { body }) {
        ctx.body = await siteUsers.updateSiteProfile(ctx.state.service(), body);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/profile/confirm-email/:token/',
      operationId: 'profile_confirm_email',
      summary: 'Confirm a new e-mail address (public: the token from the e-mail is the credential)',
      description: 'Single use, within 48 hours; 400 when expired or when another account took the address meanwhile, 404 for an unknown token.',
      tags: ['profile'],
      auth: 'public',
      params: EmailToken,
      responses: { 200: Type.Object({ status: Type.Literal('success'), message: Type.String(), data: Type.Object({ username: Type.String(), email: Type.String() }) }) },
      async handler(ctx, { params }) {
        ctx.body = { status: 'success', message: EMAIL_MESSAGES.confirmed, data: await confirmEmailChange(ctx.state.em, params.token) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/profile/change-password/',
      operationId: 'profile_change_password',
      summary: 'Change the current user\'s password',
      description:
        'Requires the old password. Every token issued before (refresh tokens included) is revoked: log in again. On a site, a user linked to a platform account changes the password on the platform (400 here).',
      tags: ['profile'],
      auth: 'user',
      scope: 'both',
      body: ChangePassword,
      responses: { 200: MessageBody },
      async handler(ctx, { body }) {
        const service = ctx.state.service();
        if (service.tenant) await siteUsers.changeSitePassword(service, body);
        else await users.changePassword(service, body);
        sendMessage(ctx, USER_MESSAGES.passwordChanged);
      },
    }),
  ];
}
