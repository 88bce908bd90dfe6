// `platform user …`: the platform's users (/api/cloud/users/), and a site user's policy attributes.
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { UserView } from '../../shared/users/user.schemas.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { pageTable, when, type Column } from '../output.ts';
import { askHidden, canPrompt } from '../prompt.ts';

const userArg = { user: Args.string({ name: 'user', description: 'Username or UUID', required: true }) };

const fieldFlags = {
  username: Flags.string({ summary: 'Username (letters, digits and . @ + - _).' }),
  email: Flags.string({ summary: 'E-mail address.' }),
  password: Flags.string({ summary: 'Password (prompted for, hidden, when omitted on a terminal).' }),
  'first-name': Flags.string({ summary: 'First name.' }),
  'last-name': Flags.string({ summary: 'Last name.' }),
  active: Flags.boolean({ summary: 'Whether the user can log in.', allowNo: true }),
  staff: Flags.boolean({ summary: 'Staff: administers ordinary users.', allowNo: true }),
  superuser: Flags.boolean({ summary: 'Superuser: every permission.', allowNo: true }),
};

/** The request body: only the fields given on the command line. */
function userInput(f: { [K in keyof typeof fieldFlags]?: string | boolean }): Record<string, unknown> {
  return defined({
    username: f.username,
    email: f.email,
    password: f.password,
    first_name: f['first-name'],
    last_name: f['last-name'],
    is_active: f.active,
    is_staff: f.staff,
    is_superuser: f.superuser,
  });
}

const COLUMNS: Column<UserView>[] = [
  { header: 'Username', get: (u) => u.username },
  { header: 'E-mail', get: (u) => u.email },
  { header: 'Name', get: (u) => [u.first_name, u.last_name].filter(Boolean).join(' ') },
  { header: 'Active', get: (u) => u.is_active },
  { header: 'Staff', get: (u) => u.is_staff },
  { header: 'Superuser', get: (u) => u.is_superuser },
  { header: 'Deleted', get: (u) => u.is_deleted },
  { header: 'Joined', get: (u) => when(u.date_joined) },
  { header: 'Last login', get: (u) => when(u.last_login) },
];

export const USER_COMMANDS = {
  'user:list': operation({
    summary: 'List platform users.',
    description: "Deleted users are hidden unless --is-deleted says otherwise. Prints the API's pagination body {count, next, previous, results} with --json.",
    examples: ['user list --search alice', 'user list --ordering -date_joined --page-size 50 --json'],
    flags: {
      search: Flags.string({ summary: 'Matches username, e-mail, first or last name.' }),
      ordering: Flags.string({ summary: 'username, email, date_joined or last_login; a leading - reverses.' }),
      'is-active': Flags.string({ summary: 'true, false or all.' }),
      'is-deleted': Flags.string({ summary: 'true, false (default) or all.' }),
      page: Flags.string({ summary: 'Page number, or "last" (default 1).' }),
      'page-size': Flags.string({ summary: 'Users per page (default 20, at most 100).' }),
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      path: '/api/cloud/users/',
      query: { search: f.search, ordering: f.ordering, is_active: f['is-active'], is_deleted: f['is-deleted'], page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<UserView>) => pageTable(page, COLUMNS, ['user', 'users']),
  }),

  'user:create': operation({
    summary: 'Create a platform user.',
    description: 'Without --username, one is generated from the e-mail or the name. Prints the API body {status, message, data} with --json.',
    examples: ['user create --username alice --email alice@example.com --first-name Alice', 'user create --email ops@example.com --staff --json'],
    flags: fieldFlags,
    request: async ({ flags }) => {
      const body = userInput(flags);
      if (body.password === undefined && canPrompt()) body.password = await askHidden('Password: ');
      return { method: 'POST', path: '/api/cloud/users/', body };
    },
  }),

  'user:get': operation({
    summary: 'Show a platform user.',
    examples: ['user get alice', 'user get 5f0c…-uuid --json'],
    args: userArg,
    request: ({ args }) => ({ method: 'GET', path: path`/api/cloud/users/${args.user}/` }),
  }),

  'user:update': operation({
    summary: 'Update a platform user.',
    description:
      "Fields left out keep their values. A new password or --no-active revokes the user's tokens. Your own new password needs --old-password (only a superuser sets another user's password without it). A new e-mail of your own takes effect when the link mailed to it is used; --restore brings back a deleted user (superusers).",
    examples: ['user update alice --first-name Alicia --no-staff', 'user update alice --no-active'],
    args: userArg,
    flags: {
      ...fieldFlags,
      'old-password': Flags.string({ summary: 'Your current password, with --password when you change your own.' }),
      restore: Flags.boolean({ summary: 'Restore a deleted user (superusers).' }),
    },
    request: ({ flags, args }) => ({
      method: 'PUT',
      path: path`/api/cloud/users/${args.user}/`,
      body: { ...userInput(flags), ...defined({ old_password: flags['old-password'], is_deleted: flags.restore ? false : undefined }) },
    }),
  }),

  'user:attributes': operation({
    summary: "Show or replace a site user's attributes (the P.attr of app policies).",
    description:
      'Without --set, prints the attributes. --set replaces the whole set with a JSON object (site administrators): names of letters, digits and _, values strings, numbers, booleans, null or arrays of those; tenant_id and app_slug are reserved. With --json, prints the site user.',
    examples: ['user attributes alice --site shop_prod', 'user attributes alice --site shop_prod --set \'{"country": "FR", "teams": ["sales"]}\''],
    args: { user: Args.string({ name: 'user', description: "The site user's username or UUID", required: true }) },
    flags: { site: siteFlag, set: Flags.string({ summary: 'The new attributes: a JSON object.' }) },
    request: ({ flags: f, args }) =>
      f.set === undefined
        ? { method: 'GET', site: f.site, path: path`/api/users/${args.user}/` }
        : { method: 'PUT', site: f.site, path: path`/api/users/${args.user}/`, body: { attributes: parseJson(f.set, 'attributes') } },
    render: (user: { attributes: Record<string, unknown> }) => JSON.stringify(user.attributes, null, 2),
  }),

  'user:delete': operation({
    summary: 'Delete a platform user (soft: the account stays, but can no longer log in).',
    examples: ['user delete alice'],
    args: userArg,
    request: ({ args }) => ({ method: 'DELETE', path: path`/api/cloud/users/${args.user}/` }),
  }),
};
