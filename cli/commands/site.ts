// `platform site …`: sites, the tenants (/api/cloud/sites/, /api/cloud/organizations/{org}/sites/).
import { Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { Privileges, SiteView } from '../../shared/sites/site.schemas.ts';
import { path } from '../api.ts';
import { api } from '../base.ts';
import { keyValues, pageOf } from '../output.ts';

const settings = { site_settings: 'settings' };

export const SITE_COMMANDS = {
  'site:list': api('sites_list', {
    examples: ['site list', 'site list --org acme --environment staging --ordering -created_at --json'],
    flags: { org: Flags.string({ summary: 'Only the sites of this organization (slug or UUID).' }) },
    path: ({ flags: f }) => (f.org === undefined ? undefined : path`/api/cloud/organizations/${f.org}/sites/`),
    render: pageOf<SiteView>(['site', 'sites'], 'slug name schema_name:schema environment is_active:active organization primary_domain created_at:created'),
  }),
  'site:create': api('organization_sites_create', {
    examples: ['site create --org acme --name "Shop" --environment staging', 'site create --org acme --name Blog --schema-name blog --domain blog.example.com --json'],
    rename: settings,
    progress: ({ flags: f }) => `Creating site "${f.name}" in organization ${f.org}: schema, tenant migrations, default data, primary domain…`,
    render: (body: CreatedBody<SiteView>, { info }) => {
      info(`Site ${body.data.slug} ready: schema ${body.data.schema_name}, primary domain ${body.data.primary_domain}.`);
      return [body.message, keyValues(body.data)];
    },
  }),
  'site:get': api('sites_retrieve', { args: ['site'], examples: ['site get shop', 'site get 5f0c…-uuid --json'] }),
  'site:update': api('sites_partial_update', { args: ['site'], rename: settings, examples: ['site update shop --name "Shop 2" --settings \'{"theme":"light"}\'', 'site update shop --no-active'] }),
  'site:delete': api('sites_destroy', { args: ['site'], examples: ['site delete shop'] }),
  'site:privileges': api('sites_privileges', {
    args: ['site'],
    examples: ['site privileges shop --json'],
    render: (body: Privileges) => (body.permissions.length ? body.permissions.join('\n') : '(no permissions)'),
  }),
};
