// `platform org …`: organizations (/api/cloud/organizations/).
import type { OrganizationView, Privileges } from '../../shared/organizations/organization.schemas.ts';
import { api } from '../base.ts';
import { pageOf } from '../output.ts';

export const ORG_COMMANDS = {
  'org:list': api('organizations_list', {
    examples: ['org list --search acme', 'org list --is-active all --ordering -created --json'],
    render: pageOf<OrganizationView>(['organization', 'organizations'], 'slug name is_active:active created modified'),
  }),
  'org:create': api('organizations_create', { examples: ['org create --name "Acme Corp"', 'org create --name Acme --slug acme --json'] }),
  'org:get': api('organizations_retrieve', { args: ['org'], examples: ['org get acme'] }),
  'org:update': api('organizations_update', { args: ['org'], examples: ['org update acme --name "Acme Inc"', 'org update acme --no-active'] }),
  'org:delete': api('organizations_destroy', { args: ['org'], examples: ['org delete acme'] }),
  'org:privileges': api('organizations_privileges', {
    args: ['org'],
    examples: ['org privileges acme --json'],
    render: (body: Privileges) => (body.permissions.length ? body.permissions.join('\n') : '(no permissions)'),
  }),
};
