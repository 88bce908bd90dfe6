// `platform role …`: the roles of an app and who holds them (/sites/<site>/api/apps/<app>/roles/).
import { Flags } from '@oclif/core';
import type { AppRoleAssignmentView, AppRoleView, MyAppRoles } from '../../shared/apps/app-roles.schemas.ts';
import { api } from '../base.ts';
import { pageOf } from '../output.ts';

export const ROLE_COMMANDS = {
  'role:list': api('app_roles_list', {
    examples: ['role list --site shop_prod --app crm --search sales --json'],
    render: pageOf<AppRoleView>(['role', 'roles'], 'name parent_name:parent description updated_at:modified'),
  }),
  'role:create': api('app_roles_create', { args: ['name'], rename: { parent_name: 'parent' }, examples: ['role create sales-manager --parent sales --description "Manages the sales team" --site shop_prod --app crm'] }),
  'role:get': api('app_roles_retrieve', { args: ['name'], examples: ['role get sales --site shop_prod --app crm --json'] }),
  'role:update': api('app_roles_partial_update', {
    args: ['name'], // the path's; the body's `name` (a new name) is --new-name
    rename: { parent_name: 'parent', name: 'new-name' },
    flags: { 'no-parent': Flags.boolean({ summary: 'Remove the parent.', exclusive: ['parent'] }) },
    body: ({ flags: f }) => (f['no-parent'] ? { parent_name: null } : {}),
    examples: ['role update sales --description "Sales team" --site shop_prod --app crm', 'role update sales-manager --no-parent --site shop_prod --app crm'],
  }),
  'role:delete': api('app_roles_destroy', { args: ['name'], examples: ['role delete sales --site shop_prod --app crm'] }),
  'role:assignments': api('app_role_assignments_list', {
    args: ['name'],
    examples: ['role assignments sales --site shop_prod --app crm'],
    render: pageOf<AppRoleAssignmentView>(['holder', 'holders'], 'username email:E-mail uuid assigned_at:assigned'),
  }),
  'role:assign': api('app_role_assignments_create', { args: ['name', 'user'], examples: ['role assign sales alice --site shop_prod --app crm'] }),
  'role:unassign': api('app_role_assignments_destroy', { args: ['name', 'user_uuid'], examples: ['role unassign sales alice --site shop_prod --app crm'] }),
  'role:mine': api('app_roles_mine', { examples: ['role mine --site shop_prod --app crm'], render: (body: MyAppRoles) => body.data.join('\n') }),
};
