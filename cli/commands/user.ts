// `platform user …`: the platform's users (/api/cloud/users/), and a site user's policy attributes.
import { Args, Flags } from '@oclif/core';
import type { UserView } from '../../shared/users/user.schemas.ts';
import { path } from '../api.ts';
import { api, operation } from '../base.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { pageOf } from '../output.ts';
import { askHidden, canPrompt } from '../prompt.ts';

/** First and last name, as one column. */
export const fullName = (u: { first_name: string; last_name: string }) => [u.first_name, u.last_name].filter(Boolean).join(' ');

export const USER_COMMANDS = {
  'user:list': api('users_list', {
    examples: ['user list --search alice', 'user list --ordering -date_joined --page-size 50 --json'],
    render: pageOf<UserView>(['user', 'users'], 'username email:e-mail name is_active:active is_staff:staff is_superuser:superuser is_deleted:deleted date_joined:joined last_login', {
      name: fullName,
    }),
  }),
  'user:create': api('users_create', {
    examples: ['user create --username alice --email alice@example.com --first-name Alice', 'user create --email ops@example.com --staff --json'],
    flags: {
      // defaultHelp: the manifest and the help show no default (and so never prompt)
      password: Flags.string({
        summary: 'Prompted for (hidden) when left out on a terminal.',
        default: async () => (canPrompt() ? askHidden('Password: ') : undefined),
        defaultHelp: async () => undefined,
      }),
    },
  }),
  'user:get': api('users_retrieve', { args: ['user'], examples: ['user get alice', 'user get 5f0c…-uuid --json'] }),
  'user:update': api('users_update', {
    args: ['user'],
    examples: ['user update alice --first-name Alicia --no-staff', 'user update alice --no-active'],
    rename: { is_deleted: false },
    flags: { restore: Flags.boolean({ summary: 'Restore a deleted user (superusers).' }) },
    body: ({ flags: f }) => ({ is_deleted: f.restore ? false : undefined }),
  }),
  'user:delete': api('users_destroy', { args: ['user'], examples: ['user delete alice'] }),
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
