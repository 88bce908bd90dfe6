// `platform role …`: the roles of an app and who holds them (/sites/<site>/api/apps/<app>/roles/).
import { Args, Flags } from '@oclif/core';
import type { AppRoleAssignmentView, AppRoleView, MyAppRoles } from '../../shared/apps/app-roles.schemas.ts';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError } from '../../shared/errors.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags, siteFlag } from '../flags.ts';
import { keyValues, pageTable, when, type Column } from '../output.ts';

const nameArg = { name: Args.string({ name: 'name', description: 'The role name', required: true }) };
const userArg = { user: Args.string({ name: 'user', description: 'A site user\'s username or UUID', required: true }) };
const roleFlags = { site: siteFlag, app: Flags.string({ summary: 'The app (slug) the role belongs to.', required: true }) };
const roles = (f: { app: string }) => path`/api/apps/${f.app}/roles/`;
const role = (f: { app: string }, name: string) => path`/api/apps/${f.app}/roles/${name}/`;

const COLUMNS: Column<AppRoleView>[] = [
  { header: 'Name', get: (r) => r.name },
  { header: 'Parent', get: (r) => r.parent_name },
  { header: 'Description', get: (r) => r.description },
  { header: 'Modified', get: (r) => when(r.updated_at) },
];

const HOLDERS: Column<AppRoleAssignmentView>[] = [
  { header: 'Username', get: (a) => a.username },
  { header: 'E-mail', get: (a) => a.email },
  { header: 'UUID', get: (a) => a.uuid },
  { header: 'Assigned', get: (a) => when(a.assigned_at) },
];

export const ROLE_COMMANDS = {
  'role:list': operation({
    summary: 'List the roles of an app.',
    description: "Prints the API's pagination body {count, next, previous, results} with --json.",
    examples: ['role list --site shop_prod --app crm', 'role list --site shop_prod --app crm --search sales --json'],
    flags: {
      ...roleFlags,
      search: Flags.string({ summary: 'Matches name or description.' }),
      ordering: Flags.string({ summary: 'name, created_at or updated_at; a leading - reverses.' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({ method: 'GET', site: f.site, path: roles(f), query: { search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] } }),
    render: (page: PageEnvelope<AppRoleView>) => pageTable(page, COLUMNS, ['role', 'roles']),
  }),

  'role:create': operation({
    summary: 'Create a role in an app (site administrators).',
    description: 'Names: a letter, then letters, digits, _ or -; admin, user and mine are reserved. --parent names a role of the same app, whose holders this role\'s holders become too.',
    examples: ['role create sales-manager --parent sales --description "Manages the sales team" --site shop_prod --app crm'],
    args: nameArg,
    flags: { ...roleFlags, description: Flags.string({ summary: 'What the role is for.' }), parent: Flags.string({ summary: 'The parent role (its name).' }) },
    request: ({ flags: f, args }) => ({ method: 'POST', site: f.site, path: roles(f), body: defined({ name: args.name, description: f.description, parent_name: f.parent }) }),
  }),

  'role:get': operation({
    summary: 'Show a role of an app.',
    examples: ['role get sales --site shop_prod --app crm --json'],
    args: nameArg,
    flags: roleFlags,
    request: ({ flags: f, args }) => ({ method: 'GET', site: f.site, path: role(f, args.name) }),
  }),

  'role:update': operation({
    summary: 'Change a role of an app (site administrators).',
    description: 'What is not given is unchanged. A parent that is the role itself or one of its descendants is refused.',
    examples: ['role update sales --description "Sales team" --site shop_prod --app crm', 'role update sales-manager --no-parent --site shop_prod --app crm'],
    args: nameArg,
    flags: {
      ...roleFlags,
      'new-name': Flags.string({ summary: 'The new name (the role keeps its assignments).' }),
      description: Flags.string({ summary: 'The new description.' }),
      parent: Flags.string({ summary: 'The new parent role (its name).', exclusive: ['no-parent'] }),
      'no-parent': Flags.boolean({ summary: 'Remove the parent.' }),
    },
    request: ({ flags: f, args }) => {
      const body = defined({ name: f['new-name'], description: f.description, parent_name: f['no-parent'] ? null : f.parent });
      if (!Object.keys(body).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --new-name, --description, --parent or --no-parent.');
      return { method: 'PATCH', site: f.site, path: role(f, args.name), body };
    },
  }),

  'role:delete': operation({
    summary: 'Delete a role of an app (site administrators); its assignments go with it, its child roles lose their parent.',
    examples: ['role delete sales --site shop_prod --app crm'],
    args: nameArg,
    flags: roleFlags,
    request: ({ flags: f, args }) => ({ method: 'DELETE', site: f.site, path: role(f, args.name) }),
  }),

  'role:assignments': operation({
    summary: 'List the users holding a role (site administrators).',
    examples: ['role assignments sales --site shop_prod --app crm'],
    args: nameArg,
    flags: { ...roleFlags, search: Flags.string({ summary: 'Matches username or e-mail.' }), ...pageFlags },
    request: ({ flags: f, args }) => ({
      method: 'GET',
      site: f.site,
      path: path`/api/apps/${f.app}/roles/${args.name}/assignments/`,
      query: { search: f.search, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<AppRoleAssignmentView>) => pageTable(page, HOLDERS, ['holder', 'holders']),
  }),

  'role:assign': operation({
    summary: 'Give a role to a site user (site administrators); nothing changes when the user holds it already.',
    examples: ['role assign sales alice --site shop_prod --app crm'],
    args: { ...nameArg, ...userArg },
    flags: roleFlags,
    request: ({ flags: f, args }) => ({ method: 'POST', site: f.site, path: path`/api/apps/${f.app}/roles/${args.name}/assignments/`, body: { user: args.user } }),
    render: (body: CreatedBody<AppRoleAssignmentView>) => [body.message, keyValues(body.data)],
  }),

  'role:unassign': operation({
    summary: 'Take a role from a site user (site administrators).',
    examples: ['role unassign sales alice --site shop_prod --app crm'],
    args: { ...nameArg, ...userArg },
    flags: roleFlags,
    request: ({ flags: f, args }) => ({ method: 'DELETE', site: f.site, path: path`/api/apps/${f.app}/roles/${args.name}/assignments/${args.user}/` }),
  }),

  'role:mine': operation({
    summary: 'Your own roles in an app, as the policies see them (with inherited roles, admin and user).',
    description: 'A signed-in site user (remote mode, or --direct --as <user>); the system actor has none.',
    examples: ['role mine --site shop_prod --app crm'],
    flags: roleFlags,
    request: ({ flags: f }) => ({ method: 'GET', site: f.site, path: path`/api/apps/${f.app}/roles/mine/` }),
    render: (body: MyAppRoles) => body.data.join('\n'),
  }),
};
