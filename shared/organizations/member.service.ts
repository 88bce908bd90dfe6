// Members of an organization: list, add, get, update (admin flag, groups, direct site
// grants), remove, make/remove admin. Viewing needs view_organization and membership (member
// bodies carry e-mails); every change needs manage_organization, and hands out only what the
// caller holds (permissions/grantable.ts). Existing users join by invitation and acceptance;
// adding one directly is for platform operators. Every change of the admin standing reaches
// the organization's sites at once (tenancy/linked-users.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import { boolFilter, likeEscape, ordering } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { isUuid, uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { DomainError, fieldError, notFound, permissionDenied, validationError, type FieldErrors } from '../errors.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { assertGrantable } from '../permissions/grantable.ts';
import { syncLinkedSiteUsers } from '../tenancy/linked-users.ts';
import type { OrganizationEntity } from './organization.entity.ts';
import { organizationFor } from './lookup.ts';
import { MemberAdd, MemberListQuery, MemberUpdate, type MemberView } from './member.schemas.ts';
import { assertNotLastAdmin, MEMBER_SELECT, memberRow, memberViews, type MemberRow } from './member.queries.ts';

// Public ordering names → fixed SQL expressions (never the client's text).
const ORDERING_FIELDS = { user__username: 'lower(u.username)', user__email: 'lower(u.email)', created: 'm.created' };

/** Member bodies (e-mails included) are for the organization's members and platform operators only. */
async function viewable(ctx: ServiceContext, orgRef: string): Promise<OrganizationEntity> {
  const org = await organizationFor(ctx, orgRef, 'view_organization');
  if (ctx.actor.kind === 'user' && !ctx.actor.is_superuser && !ctx.actor.is_staff && !ctx.grants?.memberOf.has(org.uuid)) throw notFound('Organization');
  return org;
}

export async function listMembers(ctx: ServiceContext, orgRef: string, rawQuery: unknown): Promise<Page<MemberView>> {
  const query = validate(MemberListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const order = ordering(query.ordering, ORDERING_FIELDS, 'created');
  const org = await viewable(ctx, orgRef);
  const where = ['m.organization_uuid = ?'];
  const params: unknown[] = [org.uuid];
  for (const [column, value] of [
    ['u.is_active', boolFilter(query.user__is_active, true)],
    ['u.is_deleted', boolFilter(query.user__is_deleted, false)],
    ['m.is_admin', boolFilter(query.is_admin, undefined)],
  ] as const) {
    if (value === undefined) continue;
    where.push(`${column} = ?`);
    params.push(value);
  }
  if (query.search) {
    where.push('(u.username ILIKE ? OR u.email ILIKE ? OR u.first_name ILIKE ? OR u.last_name ILIKE ?)');
    const like = `%${likeEscape(query.search)}%`;
    params.push(like, like, like, like);
  }
  const whereSql = where.join(' AND ');
  const [{ count }] = (await ctx.em.execute(
    `SELECT count(*)::int AS count FROM public.organization_members m JOIN public.users u ON u.uuid = m.user_uuid WHERE ${whereSql}`,
    params,
  )) as { count: number }[];
  const page = resolvePage(pageReq, count);
  const orderSql = [...Object.entries(order).map(([expr, dir]) => `${expr} ${dir === 'desc' ? 'DESC' : 'ASC'}`), 'm.uuid ASC'].join(', ');
  const rows = (await ctx.em.execute(`${MEMBER_SELECT} WHERE ${whereSql} ORDER BY ${orderSql} LIMIT ? OFFSET ?`, [
    ...params,
    page.pageSize,
    pageOffset(page),
  ])) as MemberRow[];
  return { ...page, count, results: await memberViews(ctx.em, org.uuid, rows) };
}

/** The member's body and membership row (404 when not a member). */
async function memberState(em: EntityManager, orgUuid: string, ref: string) {
  const row = await memberRow(em, orgUuid, ref);
  const [view] = await memberViews(em, orgUuid, [row]);
  return { row, view };
}

const viewOf = async (em: EntityManager, orgUuid: string, ref: string): Promise<MemberView> => (await memberState(em, orgUuid, ref)).view;

export async function getMember(ctx: ServiceContext, orgRef: string, ref: string): Promise<MemberView> {
  const org = await viewable(ctx, orgRef);
  return viewOf(ctx.em, org.uuid, ref);
}

export const DIRECT_ADD_REFUSED =
  'Existing users join an organization by accepting an invitation (POST …/invitations/); adding one directly is for platform superusers and staff.';

/** POST …/members/ {user_slug}: platform operators only (superusers, staff holding manage_organization, the CLI's system actor). */
export async function addMember(ctx: ServiceContext, orgRef: string, rawInput: unknown): Promise<MemberView> {
  const input = validate(MemberAdd, rawInput);
  const org = await organizationFor(ctx, orgRef, 'manage_organization');
  if (ctx.actor.kind === 'user' && !ctx.actor.is_superuser && !ctx.actor.is_staff) throw permissionDenied(DIRECT_ADD_REFUSED);
  const ref = input.user_slug.trim();
  const [user] = (await ctx.em.execute(
    `SELECT uuid FROM public.users WHERE ${isUuid(ref) ? 'uuid = ?' : 'lower(username) = ?'} AND is_active AND NOT is_deleted`,
    [ref.toLowerCase()],
  )) as { uuid: string }[];
  if (!user) throw fieldError('user_slug', 'No active user with that username or UUID.');
  const duplicate = () => fieldError('user_slug', 'This user is already a member of the organization.');
  const [existing] = await ctx.em.execute('SELECT 1 FROM public.organization_members WHERE organization_uuid = ? AND user_uuid = ?', [org.uuid, user.uuid]);
  if (existing) throw duplicate();
  try {
    await ctx.em.execute(
      'INSERT INTO public.organization_members (uuid, organization_uuid, user_uuid, is_admin, is_owner) VALUES (?, ?, ?, false, false)',
      [crypto.randomUUID(), org.uuid, user.uuid],
    );
  } catch (err) {
    if (uniqueViolation(err) === 'organization_members_unique') throw duplicate();
    throw err;
  }
  return viewOf(ctx.em, org.uuid, user.uuid);
}

/** Checks groups, sites and permission names of an update; returns the ids to write. */
async function resolveUpdate(em: EntityManager, orgUuid: string, input: MemberUpdate) {
  const errors: FieldErrors = {};
  const groupIds = [...new Set((input.groups ?? []).map((g) => (typeof g === 'number' ? g : g.id)))];
  if (groupIds.length) {
    const found = new Set(((await em.execute('SELECT id FROM public.groups WHERE id IN (?)', [groupIds])) as { id: number }[]).map((g) => g.id));
    const unknown = groupIds.filter((id) => !found.has(id));
    if (unknown.length) errors.groups = [`Unknown group id${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}.`];
  }
  const grants: { site: string; permission: number; codename: string }[] = [];
  if (input.site?.length) {
    const siteUuids = [...new Set(input.site.map((s) => s.uuid.toLowerCase()))];
    const ours = new Set(
      ((await em.execute('SELECT uuid FROM public.sites WHERE organization_uuid = ? AND uuid IN (?)', [orgUuid, siteUuids])) as { uuid: string }[]).map((s) => s.uuid),
    );
    const perms = new Map(
      ((await em.execute(`SELECT id, codename FROM public.permissions WHERE model = 'site' ORDER BY id`)) as { id: number; codename: string }[]).map((p) => [p.codename, p.id]),
    );
    const seen = new Set<string>();
    input.site.forEach((entry, i) => {
      const uuid = entry.uuid.toLowerCase();
      if (!ours.has(uuid)) (errors[`site.${i}.uuid`] ??= []).push('Not a site of this organization.');
      const bad = entry.permissions.filter((p) => !perms.has(p));
      if (bad.length) {
        (errors[`site.${i}.permissions`] ??= []).push(`Unknown site permission${bad.length > 1 ? 's' : ''}: ${bad.join(', ')}. Use: ${[...perms.keys()].join(', ')}.`);
      }
      for (const p of entry.permissions) {
        const key = `${uuid}:${p}`;
        if (!perms.has(p) || seen.has(key)) continue;
        seen.add(key);
        grants.push({ site: uuid, permission: perms.get(p)!, codename: p });
      }
    });
  }
  if (Object.keys(errors).length) throw validationError(errors);
  return { groupIds, grants };
}

/**
 * PUT: each field given replaces that part (admin flag, groups, direct site grants), in one
 * transaction. What it adds (groups, site permissions, the admin flag) must be grantable by
 * the caller; what the member already has may be sent back unchanged.
 */
export async function updateMember(ctx: ServiceContext, orgRef: string, ref: string, rawInput: unknown): Promise<MemberView> {
  const input = validate(MemberUpdate, rawInput);
  const org = await organizationFor(ctx, orgRef, 'manage_organization');
  const { row: member, view: before } = await memberState(ctx.em, org.uuid, ref);
  dropReadOnly(MemberUpdate, input, before);
  if (input.site !== undefined && input.sites !== undefined) throw fieldError('sites', 'Send the site grants once: `site` or `sites`.');
  input.site ??= input.sites;
  const { groupIds, grants } = await resolveUpdate(ctx.em, org.uuid, input);
  const held = new Set(before.sites.flatMap((s) => s.permissions.map((p) => `${s.uuid}:${p}`)));
  const addedSites = new Map<string, string[]>();
  for (const g of grants) if (!held.has(`${g.site}:${g.codename}`)) addedSites.set(g.site, [...(addedSites.get(g.site) ?? []), g.codename]);
  await assertGrantable(ctx, org.uuid, {
    groups: input.groups === undefined ? [] : groupIds.filter((id) => !before.groups.some((g) => g.id === id)),
    sites: [...addedSites].map(([uuid, permissions]) => ({ uuid, label: uuid, permissions })),
    admin: input.is_admin === true && !before.is_admin,
  });
  await ctx.em.transactional(async (tx) => {
    const em = tx as EntityManager;
    if (input.is_admin !== undefined && input.is_admin !== before.is_admin) {
      if (!input.is_admin) await assertNotLastAdmin(em, org.uuid, member.uuid, 'is_admin');
      await em.execute('UPDATE public.organization_members SET is_admin = ?, modified = now() WHERE uuid = ?', [input.is_admin, member.uuid]);
      await syncLinkedSiteUsers(em, org.uuid, member.user_uuid);
    }
    if (input.groups !== undefined) {
      await em.execute('DELETE FROM public.member_groups WHERE member_uuid = ?', [member.uuid]);
      if (groupIds.length) {
        await em.execute(`INSERT INTO public.member_groups (member_uuid, group_id) VALUES ${groupIds.map(() => '(?, ?)').join(', ')}`, groupIds.flatMap((id) => [member.uuid, id]));
      }
    }
    if (input.site !== undefined) {
      await em.execute(
        `DELETE FROM public.object_permissions WHERE user_uuid = ? AND object_type = 'site'
            AND object_uuid IN (SELECT uuid FROM public.sites WHERE organization_uuid = ?)`,
        [member.user_uuid, org.uuid],
      );
      if (grants.length) {
        await em.execute(
          `INSERT INTO public.object_permissions (user_uuid, permission_id, object_type, object_uuid) VALUES ${grants.map(() => `(?, ?, 'site', ?)`).join(', ')}`,
          grants.flatMap((g) => [member.user_uuid, g.permission, g.site]),
        );
      }
    }
  });
  return viewOf(ctx.em, org.uuid, member.uuid);
}

/** Removes the membership and the member's direct grants on the organization and its sites. The owner stays. */
export async function removeMember(ctx: ServiceContext, orgRef: string, ref: string): Promise<void> {
  const org = await organizationFor(ctx, orgRef, 'manage_organization');
  const member = await memberRow(ctx.em, org.uuid, ref);
  if (member.is_owner) {
    throw new DomainError('VALIDATION_ERROR', 'The owner cannot be removed from the organization.');
  }
  await ctx.em.transactional(async (tx) => {
    const em = tx as EntityManager;
    await assertNotLastAdmin(em, org.uuid, member.uuid);
    await em.execute(
      `DELETE FROM public.object_permissions WHERE user_uuid = ?
          AND ((object_type = 'organization' AND object_uuid = ?)
            OR (object_type = 'site' AND object_uuid IN (SELECT uuid FROM public.sites WHERE organization_uuid = ?)))`,
      [member.user_uuid, org.uuid, org.uuid],
    );
    await em.execute('DELETE FROM public.organization_members WHERE uuid = ?', [member.uuid]);
    await syncLinkedSiteUsers(em, org.uuid, member.user_uuid);
  });
}

/** make_admin / remove_admin; remove_admin refuses the last admin (under a row lock). */
export async function setAdmin(ctx: ServiceContext, orgRef: string, ref: string, isAdmin: boolean): Promise<void> {
  const org = await organizationFor(ctx, orgRef, 'manage_organization');
  const member = await memberRow(ctx.em, org.uuid, ref);
  if (isAdmin && !member.is_admin) await assertGrantable(ctx, org.uuid, { admin: true });
  await ctx.em.transactional(async (tx) => {
    const em = tx as EntityManager;
    if (!isAdmin) await assertNotLastAdmin(em, org.uuid, member.uuid);
    await em.execute('UPDATE public.organization_members SET is_admin = ?, modified = now() WHERE uuid = ?', [isAdmin, member.uuid]);
    await syncLinkedSiteUsers(em, org.uuid, member.user_uuid);
  });
}
