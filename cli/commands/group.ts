// `platform group …`: permission groups (/api/cloud/groups/).
import { Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { GroupView } from '../../shared/permissions/group.schemas.ts';
import { api } from '../base.ts';
import { keyValues, pageOf } from '../output.ts';

const permissions = (g: GroupView) => g.permissions.join(', ') || null;
const groupLines = (g: GroupView): string => keyValues({ ...g, permissions: permissions(g) });
const rename = { permissions: 'permission' };

export const GROUP_COMMANDS = {
  'group:list': api('groups_list', { examples: ['group list --search ops --json'], render: pageOf<GroupView>(['group', 'groups'], 'id name permissions', { permissions }) }),
  'group:create': api('groups_create', {
    rename,
    examples: ['group create --name Operators --permission view_site --permission access_site'],
    render: (body: CreatedBody<GroupView>) => [body.message, groupLines(body.data)],
  }),
  'group:get': api('groups_retrieve', { args: ['id'], examples: ['group get 3'], render: groupLines }),
  'group:update': api('groups_update', {
    args: ['id'],
    rename,
    examples: ['group update 3 --name Ops --permission view_site', 'group update 3 --clear-permissions'],
    flags: { 'clear-permissions': Flags.boolean({ summary: 'Remove every permission of the group.', exclusive: ['permission'] }) },
    body: ({ flags: f }) => (f['clear-permissions'] ? { permissions: [] } : {}),
    render: groupLines,
  }),
  'group:delete': api('groups_destroy', { args: ['id'], examples: ['group delete 3'] }),
};
