// Reads of memberships as plain rows (members joined with their users), and the member body
// built from a page of them in two more queries (groups, direct site grants): no per-row
// entity hydration, no per-row queries.
import type { EntityManager } from '@mikro-orm/postgresql';
import { isUuid } from '../common/slug.ts';
import { DomainError, notFound } from '../errors.ts';
import type { MemberView } from './member.schemas.ts';

export interface MemberRow {
  uuid: string;
  user_uuid: string;
  organization_uuid: string;
  is_admin: boolean;
  is_owner: boolean;
  username: string;
  email: string;
  first_name: string;
  last_name: string;
  is_active: boolean;
}

export const MEMBER_SELECT = `
SELECT m.uuid, m.user_uuid, m.organization_uuid, m.is_admin, m.is_owner,
       u.username, u.email, u.first_name, u.last_name, u.is_active
  FROM public.organization_members m JOIN public.users u ON u.uuid = m.user_uuid`;

/** One membership of the organization by username (case-insensitive), user UUID or membership UUID. */
export async function findMemberRow(em: EntityManager, orgUuid: string, ref: string): Promise<MemberRow | undefined> {
  const rows = isUuid(ref)
    ? await em.execute(`${MEMBER_SELECT} WHERE m.organization_uuid = ? AND (m.uuid = ? OR m.user_uuid = ?)`, [orgUuid, ref.toLowerCase(), ref.toLowerCase()])
    : await em.execute(`${MEMBER_SELECT} WHERE m.organization_uuid = ? AND lower(u.username) = ?`, [orgUuid, ref.toLowerCase()]);
  return rows[0] as MemberRow | undefined;
}

export async function memberRow(em: EntityManager, orgUuid: string, ref: string): Promise<MemberRow> {
  const row = await findMemberRow(em, orgUuid, ref);
  if (!row) throw notFound('Member');
  return row;
}

/** The member bodies of these rows: their groups and their direct grants on the organization's sites. */
export async function memberViews(em: EntityManager, orgUuid: string, rows: MemberRow[]): Promise<MemberView[]> {
  if (!rows.length) return [];
  const groups = (await em.execute(
    `SELECT mg.member_uuid, g.id, g.name FROM public.member_groups mg JOIN public.groups g ON g.id = mg.group_id
      WHERE mg.member_uuid IN (?) ORDER BY g.name, g.id`,
    [rows.map((r) => r.uuid)],
  )) as { member_uuid: string; id: number; name: string }[];
  const grants = (await em.execute(
    `SELECT op.user_uuid, s.uuid, s.name, s.schema_name, p.codename
       FROM public.object_permissions op
       JOIN public.sites s ON s.uuid = op.object_uuid
       JOIN public.permissions p ON p.id = op.permission_id
      WHERE op.object_type = 'site' AND op.user_uuid IN (?) AND s.organization_uuid = ?
      ORDER BY s.name, s.uuid, p.id`,
    [rows.map((r) => r.user_uuid), orgUuid],
  )) as { user_uuid: string; uuid: string; name: string; schema_name: string; codename: string }[];
  return rows.map((r) => {
    const sites: MemberView['sites'] = [];
    for (const g of grants) {
      if (g.user_uuid !== r.user_uuid) continue;
      let site = sites.at(-1);
      if (site?.uuid !== g.uuid) sites.push((site = { uuid: g.uuid, name: g.name, schema_name: g.schema_name, permissions: [] }));
      site.permissions.push(g.codename);
    }
    return {
      uuid: r.uuid,
      username: r.username,
      email: r.email,
      first_name: r.first_name,
      last_name: r.last_name,
      is_active: r.is_active,
      is_admin: r.is_admin,
      is_owner: r.is_owner,
      groups: groups.filter((g) => g.member_uuid === r.uuid).map((g) => ({ id: g.id, name: g.name })),
      sites,
    };
  });
}

/**
 * Refuses to take the admin flag from the organization's last admin. The admin rows are
 * locked (FOR UPDATE, in a fixed order) so two concurrent demotions serialise: the second
 * one re-reads the rows after the first commits and sees one admin left. Run in a transaction.
 */
export async function assertNotLastAdmin(em: EntityManager, orgUuid: string, memberUuid: string, field?: string): Promise<void> {
  const admins = (await em.execute('SELECT uuid FROM public.organization_members WHERE organization_uuid = ? AND is_admin ORDER BY uuid FOR UPDATE', [
    orgUuid,
  ])) as { uuid: string }[];
  if (admins.length <= 1 && admins.some((a) => a.uuid === memberUuid)) {
    const message = 'This member is the last admin of the organization: make another member an admin first.';
    throw new DomainError('VALIDATION_ERROR', message, field ? { errors: { [field]: [message] } } : {});
  }
}
