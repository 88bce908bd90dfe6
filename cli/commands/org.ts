// `platform org …`: organizations (/api/cloud/organizations/).
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { OrganizationView, Privileges } from '../../shared/organizations/organization.schemas.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { pageTable, when, type Column } from '../output.ts';

const orgArg = { org: Args.string({ name: 'org', description: 'Organization slug or UUID', required: true }) };
/** The organization a member, invitation or site command works in. */
export const orgFlag = Flags.string({ summary: 'The organization (slug or UUID).', required: true });

const COLUMNS: Column<OrganizationView>[] = [
  { header: 'Slug', get: (o) => o.slug },
  { header: 'Name', get: (o) => o.name },
  { header: 'Active', get: (o) => o.is_active },
  { header: 'Created', get: (o) => when(o.created) },
  { header: 'Modified', get: (o) => when(o.modified) },
];

export const ORG_COMMANDS = {
  'org:list': operation({
    summary: 'List organizations.',
    description: "Inactive organizations are hidden unless --is-active says otherwise. Prints the API's pagination body with --json.",
    examples: ['org list --search acme', 'org list --is-active all --ordering -created --json'],
    flags: {
      search: Flags.string({ summary: 'Matches name or slug.' }),
      'is-active': Flags.string({ summary: 'true (default), false or all.' }),
      ordering: Flags.string({ summary: 'name, slug, created or modified; a leading - reverses.' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      path: '/api/cloud/organizations/',
      query: { search: f.search, is_active: f['is-active'], ordering: f.ordering, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<OrganizationView>) => pageTable(page, COLUMNS, ['organization', 'organizations']),
  }),

  'org:create': operation({
    summary: 'Create an organization.',
    description:
      'Without --slug, one is generated from the name. Remotely, the logged-in user becomes its owner; with --direct (the system actor) it starts without members. Prints {status, message, data} with --json.',
    examples: ['org create --name "Acme Corp"', 'org create --name Acme --slug acme --json'],
    flags: {
      name: Flags.string({ summary: 'Name.', required: true }),
      slug: Flags.string({ summary: 'Slug (lowercase letters, digits, hyphens).' }),
    },
    request: ({ flags }) => ({ method: 'POST', path: '/api/cloud/organizations/', body: defined({ name: flags.name, slug: flags.slug }) }),
  }),

  'org:get': operation({
    summary: 'Show an organization.',
    examples: ['org get acme'],
    args: orgArg,
    request: ({ args }) => ({ method: 'GET', path: path`/api/cloud/organizations/${args.org}/` }),
  }),

  'org:update': operation({
    summary: 'Update an organization.',
    description: 'Fields left out keep their values. --no-active hides it from the default list.',
    examples: ['org update acme --name "Acme Inc"', 'org update acme --no-active'],
    args: orgArg,
    flags: {
      name: Flags.string({ summary: 'Name.' }),
      slug: Flags.string({ summary: 'Slug (lowercase letters, digits, hyphens).' }),
      active: Flags.boolean({ summary: 'Whether the organization is active.', allowNo: true }),
    },
    request: ({ flags: f, args }) => ({
      method: 'PUT',
      path: path`/api/cloud/organizations/${args.org}/`,
      body: defined({ name: f.name, slug: f.slug, is_active: f.active }),
    }),
  }),

  'org:delete': operation({
    summary: 'Delete an organization for good, with its sites (schemas dropped), memberships and invitations.',
    description: 'Members who belong to no other organization are soft-deleted (except the caller and superusers). Cannot be undone.',
    examples: ['org delete acme'],
    args: orgArg,
    request: ({ args }) => ({ method: 'DELETE', path: path`/api/cloud/organizations/${args.org}/` }),
  }),

  'org:privileges': operation({
    summary: 'Your effective permissions on an organization (group-inherited ones included).',
    examples: ['org privileges acme --json'],
    args: orgArg,
    request: ({ args }) => ({ method: 'GET', path: path`/api/cloud/organizations/${args.org}/privileges/` }),
    render: (body: Privileges) => (body.permissions.length ? body.permissions.join('\n') : '(no permissions)'),
  }),
};
