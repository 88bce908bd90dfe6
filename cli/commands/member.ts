// `platform member …`: the members of an organization (/api/cloud/organizations/{org}/members/).
import { Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { MemberView } from '../../shared/organizations/member.schemas.ts';
import { api } from '../base.ts';
import { keyValues, pageOf } from '../output.ts';
import { fullName } from './user.ts';

const groupNames = (m: MemberView) => m.groups.map((g) => `${g.name} (${g.id})`).join(', ') || null;
const siteGrants = (m: MemberView) => m.sites.map((s) => `${s.name}: ${s.permissions.join(', ')}`).join('; ') || null;
/** One member as `key: value` lines, groups and site grants spelled out. */
const memberLines = (m: MemberView): string => keyValues({ ...m, groups: groupNames(m), sites: siteGrants(m) });

/** `<uuid>=view_site,access_site` → {uuid, permissions}. */
function siteGrant(value: string) {
  const [uuid, perms = ''] = value.split('=', 2);
  return { uuid: uuid.trim(), permissions: perms.split(',').map((p) => p.trim()).filter(Boolean) };
}

export const MEMBER_COMMANDS = {
  'member:list': api('organizations_members_list', {
    examples: ['member list --org acme', 'member list --org acme --is-admin true --ordering user__username --json'],
    render: pageOf<MemberView>(['member', 'members'], 'username email:e-mail name is_active:active is_admin:admin is_owner:owner groups sites', {
      name: fullName,
      groups: groupNames,
      sites: (m) => m.sites.length,
    }),
  }),
  'member:add': api('organizations_members_create', {
    args: ['user_slug'],
    description: 'For platform operators (superusers, staff, and --direct): it attaches the user without their consent. Everyone else invites (`platform invite create`).',
    examples: ['member add alice --org acme'],
    render: (body: CreatedBody<MemberView>) => [body.message, memberLines(body.data)],
  }),
  'member:get': api('organizations_members_retrieve', { args: ['member'], examples: ['member get alice --org acme --json'], render: memberLines }),
  'member:update': api('organizations_members_update', {
    args: ['member'],
    examples: ['member update alice --org acme --admin --group 3 --site 0b7c…-uuid=view_site,access_site', 'member update alice --org acme --clear-groups --clear-sites'],
    rename: { groups: 'group', sites: false },
    flags: {
      group: Flags.string({ summary: "A group id (repeatable): the member's groups become these.", multiple: true }),
      'clear-groups': Flags.boolean({ summary: 'Remove the member from every group.', exclusive: ['group'] }),
      site: Flags.string({ summary: "<site uuid>=<perm>,<perm> (repeatable): the member's site grants become these.", multiple: true }),
      'clear-sites': Flags.boolean({ summary: 'Remove every direct site grant of the member.', exclusive: ['site'] }),
    },
    body: ({ flags: f }) => ({
      // a value that is no integer is passed on for the API to refuse by field
      groups: f['clear-groups'] ? [] : f.group?.map((v: string) => (/^\d+$/.test(v) ? Number(v) : v)),
      site: f['clear-sites'] ? [] : f.site?.map(siteGrant),
    }),
    render: memberLines,
  }),
  'member:remove': api('organizations_members_destroy', { args: ['member'], examples: ['member remove alice --org acme'] }),
  'member:make-admin': api('organizations_members_make_admin', { args: ['member'], examples: ['member make-admin alice --org acme'] }),
  'member:remove-admin': api('organizations_members_remove_admin', { args: ['member'], examples: ['member remove-admin alice --org acme'] }),
};
