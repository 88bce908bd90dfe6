// What an invitation grants: checked when it is created (references exist, sites belong to the
// organization, the inviter holds every permission it hands out) and applied when it is accepted
// (membership, organization permissions, groups, site permissions), in the accept transaction.
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { isUuid } from '../common/slug.ts';
import type { ServiceContext } from '../context.ts';
import { validationError, type FieldErrors } from '../errors.ts';
import { assertGrantable } from '../permissions/grantable.ts';
import type { OrganizationEntity } from '../organizations/organization.entity.ts';
import type { InvitationCreate, StoredInvitationConfig } from './invitation.schemas.ts';

/** `?, ?, ?` for a bound list. */
export const marks = (n: number): string => Array.from({ length: n }, () => '?').join(', ');

export interface ResolvedGrants {
  permissions: string[];
  config: StoredInvitationConfig;
}

interface SiteRow {
  uuid: string;
  slug: string;
  organization_uuid: string;
}

async function resolveGroups(em: EntityManager, refs: (number | string)[], errors: FieldErrors): Promise<number[]> {
  const ids = refs.filter((r): r is number => typeof r === 'number');
  const names = refs.filter((r): r is string => typeof r === 'string').map((r) => r.toLowerCase());
  const where = [ids.length ? `id IN (${marks(ids.length)})` : '', names.length ? `lower(name) IN (${marks(names.length)})` : ''].filter(Boolean).join(' OR ');
  const rows = (await em.execute(`SELECT id, name FROM public.groups WHERE ${where}`, [...ids, ...names])) as { id: number; name: string }[];
  const found: number[] = [];
  refs.forEach((ref, i) => {
    const row = rows.find((g) => (typeof ref === 'number' ? g.id === ref : g.name.toLowerCase() === ref.toLowerCase()));
    if (row) found.push(row.id);
    else errors[`invitation_config.group.${i}`] = [typeof ref === 'number' ? `Group ${ref} does not exist.` : `Group "${ref}" does not exist.`];
  });
  return [...new Set(found)];
}

async function resolveSites(em: EntityManager, org: OrganizationEntity, grants: { slug: string; permissions: string[] }[], errors: FieldErrors) {
  const uuids = grants.map((g) => g.slug).filter(isUuid).map((s) => s.toLowerCase());
  const slugs = grants.map((g) => g.slug).filter((s) => !isUuid(s)).map((s) => s.toLowerCase());
  const where = [uuids.length ? `uuid IN (${marks(uuids.length)})` : '', slugs.length ? `slug IN (${marks(slugs.length)})` : ''].filter(Boolean).join(' OR ');
  const rows = (await em.execute(`SELECT uuid, slug, organization_uuid FROM public.sites WHERE ${where}`, [...uuids, ...slugs])) as SiteRow[];
  const bySlug = new Map<string, { site: SiteRow; permissions: Set<string> }>();
  grants.forEach((grant, i) => {
    const ref = grant.slug.toLowerCase();
    const site = rows.find((s) => s.uuid === ref || s.slug === ref);
    if (!site || site.organization_uuid !== org.uuid) {
      errors[`invitation_config.site.${i}.slug`] = [`Site "${grant.slug}" is not a site of organization "${org.slug}".`];
      return;
    }
    const entry = bySlug.get(site.slug) ?? { site, permissions: new Set<string>() };
    for (const p of grant.permissions) entry.permissions.add(p);
    bySlug.set(site.slug, entry);
  });
  return [...bySlug.values()];
}

/**
 * Checks and normalizes what the invitation grants: 400 with field-keyed messages for unknown
 * groups and sites outside the organization; 403 when the inviter would hand out anything
 * they do not hold (permissions/grantable.ts).
 */
export async function resolveInvitationGrants(ctx: ServiceContext, org: OrganizationEntity, input: InvitationCreate): Promise<ResolvedGrants> {
  const errors: FieldErrors = {};
  const permissions = [...new Set(input.permissions ?? [])];
  const config: StoredInvitationConfig = {};
  const groupRefs = input.invitation_config?.group ?? [];
  const groups = groupRefs.length ? await resolveGroups(ctx.em, groupRefs, errors) : [];
  const siteRefs = input.invitation_config?.site ?? [];
  const sites = siteRefs.length ? await resolveSites(ctx.em, org, siteRefs, errors) : [];
  if (Object.keys(errors).length) throw validationError(errors);
  if (groupRefs.length) config.group = groups;
  if (siteRefs.length) config.site = sites.map((s) => ({ slug: s.site.slug, permissions: [...s.permissions] }));
  await assertGrantable(ctx, org.uuid, {
    permissions,
    sites: sites.map((s) => ({ uuid: s.site.uuid, label: s.site.slug, permissions: [...s.permissions] })),
    groups,
  });
  return { permissions, config };
}

/**
 * Applies an accepted invitation for `userUuid` inside the caller's transaction: membership
 * (neither admin nor owner), organization permissions, groups, site permissions. Groups or
 * sites deleted since the invitation was made are skipped; grants already held stay as they are.
 */
export async function applyInvitationGrants(
  tx: EntityManager,
  inv: { organization_uuid: string; permissions: string[]; invitation_config: StoredInvitationConfig },
  userUuid: string,
): Promise<void> {
  const org = inv.organization_uuid;
  await tx.execute(
    `INSERT INTO public.organization_members (uuid, organization_uuid, user_uuid) VALUES (?, ?, ?) ON CONFLICT (organization_uuid, user_uuid) DO NOTHING`,
    [randomUUID(), org, userUuid],
  );
  const [member] = (await tx.execute('SELECT uuid FROM public.organization_members WHERE organization_uuid = ? AND user_uuid = ?', [org, userUuid])) as { uuid: string }[];
  const grant = async (type: 'organization' | 'site', codenames: string[], objectSql: string, objectParams: unknown[]) => {
    if (!codenames.length) return;
    await tx.execute(
      `INSERT INTO public.object_permissions (user_uuid, permission_id, object_type, object_uuid)
       SELECT ?::uuid, p.id, ?::text, o.uuid FROM public.permissions p CROSS JOIN (${objectSql}) o
        WHERE p.model = ?::text AND p.codename IN (${marks(codenames.length)})
       ON CONFLICT DO NOTHING`,
      [userUuid, type, ...objectParams, type, ...codenames],
    );
  };
  await grant('organization', inv.permissions, 'SELECT ?::uuid AS uuid', [org]);
  const groups = inv.invitation_config.group ?? [];
  if (groups.length) {
    await tx.execute(
      `INSERT INTO public.member_groups (member_uuid, group_id) SELECT ?::uuid, id FROM public.groups WHERE id IN (${marks(groups.length)}) ON CONFLICT DO NOTHING`,
      [member.uuid, ...groups],
    );
  }
  for (const site of inv.invitation_config.site ?? []) {
    await grant('site', site.permissions, 'SELECT uuid FROM public.sites WHERE slug = ? AND organization_uuid = ?', [site.slug, org]);
  }
}
