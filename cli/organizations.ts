// What the org, member and group commands share: arguments and flags, and how
// organizations, members and groups are shown to a person.
import { Args, Flags } from '@oclif/core';
import type { MemberUpdate, MemberView } from '../shared/organizations/member.schemas.ts';
import type { OrganizationView } from '../shared/organizations/organization.schemas.ts';
import type { GroupView } from '../shared/permissions/group.schemas.ts';
import { type Column, keyValues, when } from './output.ts';
export { pageFlags } from './flags.ts';
export { pageTable } from './output.ts';

export const orgRefArg = Args.string({ name: 'org', description: 'Organization slug or UUID', required: true });
export const orgFlag = Flags.string({ summary: 'The organization (slug or UUID).', required: true });
export const memberRefArg = Args.string({ name: 'user', description: 'Username, user UUID or membership UUID', required: true });
export const groupIdArg = Args.string({ name: 'id', description: 'Group id', required: true });

export const ORG_COLUMNS: Column<OrganizationView>[] = [
  { header: 'Slug', get: (o) => o.slug },
  { header: 'Name', get: (o) => o.name },
  { header: 'Active', get: (o) => o.is_active },
  { header: 'Created', get: (o) => when(o.created) },
  { header: 'Modified', get: (o) => when(o.modified) },
];

const groupNames = (m: MemberView) => m.groups.map((g) => `${g.name} (${g.id})`).join(', ');
const siteGrants = (m: MemberView) => m.sites.map((s) => `${s.name}: ${s.permissions.join(', ')}`).join('; ');

export const MEMBER_COLUMNS: Column<MemberView>[] = [
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
export function memberLines(m: MemberView): string {
  return keyValues({ ...m, groups: groupNames(m) || null, sites: siteGrants(m) || null });
}

export const GROUP_COLUMNS: Column<GroupView>[] = [
  { header: 'ID', get: (g) => g.id },
  { header: 'Name', get: (g) => g.name },
  { header: 'Permissions', get: (g) => g.permissions.join(', ') || null },
];

export const groupLines = (g: GroupView): string => keyValues({ ...g, permissions: g.permissions.join(', ') || null });

/** `--group 3 --group 5` → [3, 5]; a value that is no integer is passed on for the API to refuse by field. */
export const groupIds = (values: string[]): number[] => values.map((v) => (/^\d+$/.test(v) ? Number(v) : v) as number);

/** `--site <uuid>=view_site,access_site` → {uuid, permissions}. */
export function siteGrant(value: string): NonNullable<MemberUpdate['site']>[number] {
  const [uuid, perms = ''] = value.split('=', 2);
  return { uuid: uuid.trim(), permissions: perms.split(',').map((p) => p.trim()).filter(Boolean) };
}
