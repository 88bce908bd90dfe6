// `platform user …`: the platform's users (/api/cloud/users/), a site's own users (--site), and a
// site user's policy attributes.
import { Args, Flags } from '@oclif/core';
import type { SiteUserView } from '../../shared/tenancy/tenant-users.schemas.ts';
import type { UserView } from '../../shared/users/user.schemas.ts';
import { path } from '../api.ts';
import { api, bySite, operation } from '../base.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { pageOf } from '../output.ts';
import { askHidden, canPrompt } from '../prompt.ts';

/** First and last name, as one column. */
export const fullName = (u: { first_name: string; last_name: string }) => [u.first_name, u.last_name].filter(Boolean).join(' ');

const passwordFlag = Flags.string({
  summary: 'Prompted for (hidden) when left out on a terminal.',
  default: async () => (canPrompt() ? askHidden('Password: ') : undefined),
  defaultHelp: async () => undefined, // the manifest and the help show no default (and so never prompt)
});
const listColumns = 'username email:e-mail name is_active:active is_staff:staff is_superuser:superuser is_deleted:deleted date_joined:joined last_login';

// Each command serves the platform's users (/api/cloud/users/) and, with --site, a site's own
// users (/api/users/ on the site): two operations of the route registry, one command.
export const USER_COMMANDS = {
  'user:list': bySite(
    api('users_list', {
      examples: ['user list --search alice', 'user list --ordering -date_joined --page-size 50 --json'],
      render: pageOf<UserView>(['user', 'users'], listColumns, { name: fullName }),
    }),
    api('site_users_list', {
      examples: ['user list --site shop_prod', 'user list --site shop_prod --direct --as alice'],
      render: pageOf<SiteUserView>(['user', 'users'], listColumns, { name: fullName }),
    }),
    'users',
  ),
  'user:create': bySite(
    api('users_create', {
      examples: ['user create --username alice --email alice@example.com --first-name Alice', 'user create --email ops@example.com --staff --json'],
      flags: { password: passwordFlag },
    }),
    api('site_users_create', {
      examples: ['user create --site shop_prod --username bob --email bob@example.com --password …'],
      flags: { password: passwordFlag },
    }),
    'users',
  ),
  'user:get': bySite(
    api('users_retrieve', { args: ['user'], examples: ['user get alice', 'user get 5f0c…-uuid --json'] }),
    api('site_users_retrieve', { args: ['user'], examples: ['user get bob --site shop_prod'] }),
    'users',
  ),
  'user:update': bySite(
    api('users_update', {
      args: ['user'],
      examples: ['user update alice --first-name Alicia --no-staff', 'user update alice --no-active', 'user update admin --password … --direct'],
      rename: { is_deleted: false },
      flags: { restore: Flags.boolean({ summary: 'Restore a deleted user (superusers).' }) },
      body: ({ flags: f }) => ({ is_deleted: f.restore ? false : undefined }),
    }),
    api('site_users_update', {
      args: ['user'],
      examples: ['user update bob --site shop_prod --no-active', 'user update bob --site shop_prod --attributes \'{"country": "FR"}\''],
    }),
    'users',
  ),
  'user:delete': bySite(
    api('users_destroy', { args: ['user'], examples: ['user delete alice'] }),
    api('site_users_destroy', { args: ['user'], examples: ['user delete bob --site shop_prod'] }),
    'users',
  ),
  // Two operations (GET, or PUT with --set): a hand-written request.
  'user:attributes': operation({
    summary: "Show or replace a site user's attributes (the P.attr of app policies).",
    description:
      'Without --set, prints the attributes. --set replaces the whole set with a JSON object (site administrators): names of letters, digits and _, values strings, numbers, booleans, null or arrays of those; tenant_id and app_slug are reserved. With --json, prints the site user.',
    examples: ['user attributes alice --site shop_prod', 'user attributes alice --site shop_prod --set \'{"country": "FR", "teams": ["sales"]}\''],
    args: { user: Args.string({ description: "The site user's username or UUID", required: true }) },
    flags: { site: siteFlag, set: Flags.string({ summary: 'The new attributes: a JSON object.' }) },
    request: ({ flags: f, args }) => {
      const body = f.set === undefined ? undefined : { attributes: parseJson(f.set, 'attributes') };
      return { method: body ? 'PUT' : 'GET', site: f.site, path: path`/api/users/${args.user}/`, body };
    },
    render: (user: { attributes: Record<string, unknown> }) => JSON.stringify(user.attributes, null, 2),
  }),
};
