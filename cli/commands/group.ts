// `platform group …`: permission groups (/api/cloud/groups/).
import { Args, Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { GroupView } from '../../shared/permissions/group.schemas.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { keyValues, pageTable, type Column } from '../output.ts';

const idArg = { id: Args.string({ name: 'id', description: 'Group id', required: true }) };
const permissionFlag = Flags.string({ summary: 'A permission codename (repeatable).', multiple: true });

const COLUMNS: Column<GroupView>[] = [
  { header: 'ID', get: (g) => g.id },
  { header: 'Name', get: (g) => g.name },
  { header: 'Permissions', get: (g) => g.permissions.join(', ') || null },
];

const groupLines = (g: GroupView): string => keyValues({ ...g, permissions: g.permissions.join(', ') || null });

export const GROUP_COMMANDS = {
  'group:list': operation({
    summary: 'List groups.',
    examples: ['group list --search ops --json'],
    flags: {
      search: Flags.string({ summary: 'Matches the name.' }),
      ordering: Flags.string({ summary: 'name or id; a leading - reverses.' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({ method: 'GET', path: '/api/cloud/groups/', query: { search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] } }),
    render: (page: PageEnvelope<GroupView>) => pageTable(page, COLUMNS, ['group', 'groups']),
  }),

  'group:create': operation({
    summary: 'Create a group (superusers and staff).',
    examples: ['group create --name Operators --permission view_site --permission access_site'],
    flags: { name: Flags.string({ summary: 'Name (unique, case-insensitively).', required: true }), permission: permissionFlag },
    request: ({ flags }) => ({ method: 'POST', path: '/api/cloud/groups/', body: defined({ name: flags.name, permissions: flags.permission }) }),
    render: (body: CreatedBody<GroupView>) => [body.message, groupLines(body.data)],
  }),

  'group:get': operation({
    summary: 'Show a group.',
    examples: ['group get 3'],
    args: idArg,
    request: ({ args }) => ({ method: 'GET', path: path`/api/cloud/groups/${args.id}/` }),
    render: groupLines,
  }),

  'group:update': operation({
    summary: 'Update a group (superusers and staff).',
    description: '--permission (repeatable) replaces the whole set; what is not given is unchanged.',
    examples: ['group update 3 --name Ops --permission view_site', 'group update 3 --clear-permissions'],
    args: idArg,
    flags: {
      name: Flags.string({ summary: 'Name.' }),
      permission: permissionFlag,
      'clear-permissions': Flags.boolean({ summary: 'Remove every permission of the group.', exclusive: ['permission'] }),
    },
    request: ({ flags: f, args }) => ({
      method: 'PUT',
      path: path`/api/cloud/groups/${args.id}/`,
      body: defined({ name: f.name, permissions: f.permission ?? (f['clear-permissions'] ? [] : undefined) }),
    }),
    render: groupLines,
  }),

  'group:delete': operation({
    summary: 'Delete a group (superusers and staff); its members lose it and the grants it held.',
    examples: ['group delete 3'],
    args: idArg,
    request: ({ args }) => ({ method: 'DELETE', path: path`/api/cloud/groups/${args.id}/` }),
  }),
};
