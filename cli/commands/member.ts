// `platform member …`: the members of an organization (/api/cloud/organizations/{org}/members/).
import { Args, Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { MemberUpdate, MemberView } from '../../shared/organizations/member.schemas.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { keyValues, pageTable, type Column } from '../output.ts';
import { orgFlag } from './org.ts';

const memberArg = Args.string({ name: 'user', description: 'Username, user UUID or membership UUID', required: true });
const memberPath = (org: string, ref: string, action = '') => path`/api/cloud/organizations/${org}/members/${ref}/` + action;

const groupNames = (m: MemberView) => m.groups.map((g) => `${g.name} (${g.id})`).join(', ');
const siteGrants = (m: MemberView) => m.sites.map((s) => `${s.name}: ${s.permissions.join(', ')}`).join('; ');

const COLUMNS: Column<MemberView>[] = [
  { header: 'Username', get: (m) => m.username },
  { header: 'E-mail', get: (m) => m.email },
  { header: 'Name', get: (m) => [m.first_name, m.last_name].filter(Boolean).join(' ') },
  { header: 'Active', get: (m) => m.is_active },
  { header: 'Admin', get: (m) => m.is_admin },
  { header: 'Owner', get: (m) => m.is_owner },
  { header: 'Groups', get: (m) => groupNames(m) || null },
  { header: 'Sites', get: (m) => m.sites.length },
];

/** One member as `key: value` lines, groups and site grants spelled out. */
const memberLines = (m: MemberView): string => keyValues({ ...m, groups: groupNames(m) || null, sites: siteGrants(m) || null });

/** `--site <uuid>=view_site,access_site` → {uuid, permissions}. */
function siteGrant(value: string): NonNullable<MemberUpdate['site']>[number] {
  const [uuid, perms = ''] = value.split('=', 2);
  return { uuid: uuid.trim(), permissions: perms.split(',').map((p) => p.trim()).filter(Boolean) };
}

/** A member action answered with a message (remove, make-admin, remove-admin). */
const memberAction = (summary: string, example: string, method: 'DELETE' | 'POST', action = '') =>
  operation({
    summary,
    examples: [example],
    args: { user: memberArg },
    flags: { org: orgFlag },
    request: ({ flags, args }) => ({ method, path: memberPath(flags.org, args.user, action) }),
  });

export const MEMBER_COMMANDS = {
  'member:list': operation({
    summary: 'List the members of an organization.',
    description: "Inactive and deleted users are hidden unless --user-is-active / --user-is-deleted say otherwise. Prints the API's pagination body with --json.",
    examples: ['member list --org acme', 'member list --org acme --is-admin true --ordering user__username --json'],
    flags: {
      org: orgFlag,
      search: Flags.string({ summary: 'Matches username, e-mail, first or last name.' }),
      'is-admin': Flags.string({ summary: 'true, false or all (default).' }),
      'user-is-active': Flags.string({ summary: 'true (default), false or all.' }),
      'user-is-deleted': Flags.string({ summary: 'true, false (default) or all.' }),
      ordering: Flags.string({ summary: 'user__username, user__email or created; a leading - reverses.' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      path: path`/api/cloud/organizations/${f.org}/members/`,
      query: {
        search: f.search,
        is_admin: f['is-admin'],
        user__is_active: f['user-is-active'],
        user__is_deleted: f['user-is-deleted'],
        ordering: f.ordering,
        page: f.page,
        page_size: f['page-size'],
      },
    }),
    render: (page: PageEnvelope<MemberView>) => pageTable(page, COLUMNS, ['member', 'members']),
  }),

  'member:add': operation({
    summary: 'Add an existing, active user to an organization.',
    description:
      'For platform operators (superusers, staff, and --direct): it attaches the user without their consent. Everyone else invites (`platform invite create`), and the invitee accepts.',
    examples: ['member add alice --org acme'],
    args: { user: { ...memberArg, description: 'Username or UUID of the user' } },
    flags: { org: orgFlag },
    request: ({ flags, args }) => ({ method: 'POST', path: path`/api/cloud/organizations/${flags.org}/members/`, body: { user_slug: args.user } }),
    render: (body: CreatedBody<MemberView>) => [body.message, memberLines(body.data)],
  }),

  'member:get': operation({
    summary: 'Show a member with groups and site permissions.',
    examples: ['member get alice --org acme --json'],
    args: { user: memberArg },
    flags: { org: orgFlag },
    request: ({ flags, args }) => ({ method: 'GET', path: memberPath(flags.org, args.user) }),
    render: memberLines,
  }),

  'member:update': operation({
    summary: "Set a member's admin flag, groups and direct site permissions.",
    description: "--group (repeatable) replaces the member's groups, --site (repeatable) their grants on this organization's sites; what is not given is unchanged.",
    examples: [
      'member update alice --org acme --admin',
      'member update alice --org acme --group 3 --group 5 --site 0b7c…-uuid=view_site,access_site',
      'member update alice --org acme --clear-groups --clear-sites',
    ],
    args: { user: memberArg },
    flags: {
      org: orgFlag,
      admin: Flags.boolean({ summary: 'Whether the member is an admin.', allowNo: true }),
      group: Flags.string({ summary: "A group id (repeatable): the member's groups become these.", multiple: true }),
      'clear-groups': Flags.boolean({ summary: 'Remove the member from every group.', exclusive: ['group'] }),
      site: Flags.string({ summary: "<site uuid>=<perm>,<perm> (repeatable): the member's site grants become these.", multiple: true }),
      'clear-sites': Flags.boolean({ summary: 'Remove every direct site grant of the member.', exclusive: ['site'] }),
    },
    request: ({ flags: f, args }) => ({
      method: 'PUT',
      path: memberPath(f.org, args.user),
      body: defined({
        is_admin: f.admin,
        // a value that is no integer is passed on for the API to refuse by field
        groups: f.group ? f.group.map((v) => (/^\d+$/.test(v) ? Number(v) : v)) : f['clear-groups'] ? [] : undefined,
        site: f.site ? f.site.map(siteGrant) : f['clear-sites'] ? [] : undefined,
      }),
    }),
    render: memberLines,
  }),

  'member:remove': memberAction('Remove a member (and their direct grants on the organization and its sites).', 'member remove alice --org acme', 'DELETE'),
  'member:make-admin': memberAction('Make a member an admin of the organization.', 'member make-admin alice --org acme', 'POST', 'make_admin/'),
  'member:remove-admin': memberAction('Take the admin flag from a member (refused for the last admin).', 'member remove-admin alice --org acme', 'POST', 'remove_admin/'),
};
