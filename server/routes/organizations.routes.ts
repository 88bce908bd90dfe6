import type { Config } from '../../shared/config.ts';
import * as orgs from '../../shared/organizations/organization.service.ts';
import {
  ORGANIZATION_MESSAGES,
  OrganizationCreate,
  OrganizationListQuery,
  OrganizationRef,
  OrganizationUpdate,
  OrganizationView,
  Privileges,
} from '../../shared/organizations/organization.schemas.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

const LIST = '/api/cloud/organizations/';
const ONE = '/api/cloud/organizations/:org/';
/** The overview's form without `cloud` (spec §1.2). */
export const alias = (path: string): string[] => [path.replace('/api/cloud/', '/api/')];

export function organizationRoutes(config: Config): RouteDef[] {
  const publicUrl = config.publicUrl;
  return [
    defineRoute({
      method: 'get',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'organizations_list',
      summary: 'List organizations',
      description: 'The organizations the caller may view (superusers: all). Inactive ones are hidden unless `is_active` says otherwise.',
      tags: ['organizations'],
      auth: 'user',
      query: OrganizationListQuery,
      responses: { 200: paginated(OrganizationView) },
      async handler(ctx, { query }) {
        sendPage(ctx, await orgs.listOrganizations(ctx.state.service(), query), publicUrl);
      },
    }),
    defineRoute({
      method: 'post',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'organizations_create',
      summary: 'Create an organization',
      description: 'The caller becomes its owner (and an admin). One user owns at most QUOTA_ORGANIZATIONS_PER_USER organizations (422 beyond; operators are exempt).',
      tags: ['organizations'],
      auth: 'user',
      body: OrganizationCreate,
      responses: { 201: created(OrganizationView) },
      async handler(ctx, { body }) {
        sendCreated(ctx, ORGANIZATION_MESSAGES.created, await orgs.createOrganization(ctx.state.service(), body, config.quotas));
      },
    }),
    defineRoute({
      method: 'get',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'organizations_retrieve',
      summary: 'Get an organization by slug or UUID',
      tags: ['organizations'],
      auth: 'user',
      params: OrganizationRef,
      responses: { 200: OrganizationView },
      async handler(ctx, { params }) {
        ctx.body = await orgs.getOrganization(ctx.state.service(), params.org);
      },
    }),
    defineRoute({
      method: 'put',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'organizations_update',
      summary: 'Update an organization',
      description: 'Needs `change_organization`. Fields left out keep their values.',
      tags: ['organizations'],
      auth: 'user',
      params: OrganizationRef,
      body: OrganizationUpdate,
      responses: { 200: OrganizationView },
      async handler(ctx, { params, body }) {
        ctx.body = await orgs.updateOrganization(ctx.state.service(), params.org, body);
      },
    }),
    defineRoute({
      method: 'delete',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'organizations_destroy',
      summary: 'Delete an organization (hard, with cascade)',
      description:
        'Needs `delete_organization`. In one transaction: every site of the organization (schema dropped, domains and grants removed), ' +
        'its memberships, invitations and grants; members who belong to no other organization are soft-deleted (except the caller and superusers).',
      tags: ['organizations'],
      auth: 'user',
      params: OrganizationRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await orgs.deleteOrganization(ctx.state.service(), params.org);
        sendMessage(ctx, ORGANIZATION_MESSAGES.deleted);
      },
    }),
    defineRoute({
      method: 'get',
      path: `${ONE}privileges/`,
      aliases: alias(`${ONE}privileges/`),
      operationId: 'organizations_privileges',
      summary: 'The caller\'s effective permissions on the organization',
      description: 'Including those inherited from the owner and admin roles and from groups.',
      tags: ['organizations'],
      auth: 'user',
      params: OrganizationRef,
      responses: { 200: Privileges },
      async handler(ctx, { params }) {
        ctx.body = await orgs.organizationPrivileges(ctx.state.service(), params.org);
      },
    }),
  ];
}
