import * as members from '../../shared/organizations/member.service.ts';
import { MemberAdd, MemberListQuery, MemberRef, MemberUpdate, MemberView } from '../../shared/organizations/member.schemas.ts';
import { ORGANIZATION_MESSAGES, OrganizationRef } from '../../shared/organizations/organization.schemas.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import { alias } from './organizations.routes.ts';

const LIST = '/api/cloud/organizations/:org/members/';
const ONE = '/api/cloud/organizations/:org/members/:member/';

export function memberRoutes(publicUrl: string | undefined): RouteDef[] {
  const action = (name: 'make_admin' | 'remove_admin', summary: string, isAdmin: boolean, message: string): RouteDef =>
    defineRoute({
      method: 'post',
      path: `${ONE}${name}/`,
      aliases: alias(`${ONE}${name}/`),
      operationId: `organizations_members_${name}`,
      summary,
      description: isAdmin ? 'Needs `manage_organization`. No body.' : 'Needs `manage_organization`. No body. Refused (400) for the last admin.',
      tags: ['members'],
      auth: 'user',
      params: MemberRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await members.setAdmin(ctx.state.service(), params.org, params.member, isAdmin);
        sendMessage(ctx, message);
      },
    });
  return [
    defineRoute({
      method: 'get',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'organizations_members_list',
      summary: 'List the members of an organization',
      description: 'Defaults: `user__is_active=true`, `user__is_deleted=false`; explicit values (`all`/`*` included) override them.',
      tags: ['members'],
      auth: 'user',
      params: OrganizationRef,
      query: MemberListQuery,
      responses: { 200: paginated(MemberView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await members.listMembers(ctx.state.service(), params.org, query), publicUrl);
      },
    }),
    defineRoute({
      method: 'post',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'organizations_members_create',
      summary: 'Add an existing user to the organization',
      description: 'Needs `manage_organization`.',
      tags: ['members'],
      auth: 'user',
      params: OrganizationRef,
      body: MemberAdd,
      responses: { 201: created(MemberView) },
      async handler(ctx, { params, body }) {
        sendCreated(ctx, ORGANIZATION_MESSAGES.memberAdded, await members.addMember(ctx.state.service(), params.org, body));
      },
    }),
    defineRoute({
      method: 'get',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'organizations_members_retrieve',
      summary: 'Get a member with groups and site permissions',
      tags: ['members'],
      auth: 'user',
      params: MemberRef,
      responses: { 200: MemberView },
      async handler(ctx, { params }) {
        ctx.body = await members.getMember(ctx.state.service(), params.org, params.member);
      },
    }),
    defineRoute({
      method: 'put',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'organizations_members_update',
      summary: 'Set a member\'s admin flag, groups and direct site permissions',
      description: 'Needs `manage_organization`. Each field given replaces that part wholesale; one transaction.',
      tags: ['members'],
      auth: 'user',
      params: MemberRef,
      body: MemberUpdate,
      responses: { 200: MemberView },
      async handler(ctx, { params, body }) {
        ctx.body = await members.updateMember(ctx.state.service(), params.org, params.member, body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'organizations_members_destroy',
      summary: 'Remove a member',
      description: 'Needs `manage_organization`. Also removes the member\'s direct grants on the organization and its sites. The owner cannot be removed.',
      tags: ['members'],
      auth: 'user',
      params: MemberRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await members.removeMember(ctx.state.service(), params.org, params.member);
        sendMessage(ctx, ORGANIZATION_MESSAGES.memberRemoved);
      },
    }),
    action('make_admin', 'Make a member an admin', true, ORGANIZATION_MESSAGES.madeAdmin),
    action('remove_admin', 'Take the admin flag from a member', false, ORGANIZATION_MESSAGES.removedAdmin),
  ];
}
