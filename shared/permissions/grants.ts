// Object-level permissions on organizations and sites, gathered in one query from the
// user's memberships (owner, admin), direct grants, and the grants of their groups, then
// turned into rules of the request's one CASL ability; a site user's permissions in its site
// likewise (tenancy/site-grants.ts).
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ServiceContext } from '../context.ts';
import { defineAbility, type AppAbility } from '../auth/actor.ts';
import { loadSitePermissions } from '../tenancy/site-grants.ts';

export const ORGANIZATION_PERMISSIONS = ['view_organization', 'change_organization', 'delete_organization', 'manage_organization', 'invite_members'] as const;
export const SITE_PERMISSIONS = ['view_site', 'change_site', 'delete_site', 'access_site', 'manage_site', 'manage_site_users', 'admin_site'] as const;
export type OrganizationPermission = (typeof ORGANIZATION_PERMISSIONS)[number];
export type SitePermission = (typeof SITE_PERMISSIONS)[number];
export type ObjectPermissionName = OrganizationPermission | SitePermission;

/** What an admin (not owner) holds on the organization: everything but deleting it. */
const ADMIN_ORG = ORGANIZATION_PERMISSIONS.filter((p) => p !== 'delete_organization');

export interface Grants {
  organization: Map<string, Set<string>>;
  site: Map<string, Set<string>>;
  /** The organizations the user is a member of. */
  memberOf: Set<string>;
}

const lit = (list: readonly string[]) => `ARRAY[${list.map((p) => `'${p}'`).join(',')}]::text[]`;

// Every (object_type, object_uuid, codename) the user holds; one round trip.
const GRANTS_SQL = `
WITH m AS (
  SELECT uuid, organization_uuid, is_owner, is_admin FROM public.organization_members WHERE user_uuid = ?
), g AS (
  SELECT mg.group_id, m.organization_uuid FROM public.member_groups mg JOIN m ON m.uuid = mg.member_uuid
)
SELECT 'member' AS t, m.organization_uuid AS o, '' AS p FROM m
UNION ALL
SELECT 'organization', m.organization_uuid, unnest(CASE WHEN m.is_owner THEN ${lit(ORGANIZATION_PERMISSIONS)}
                                                              WHEN m.is_admin THEN ${lit(ADMIN_ORG)}
                                                              ELSE ARRAY['view_organization']::text[] END)
  FROM m
UNION ALL
SELECT 'site', s.uuid, unnest(${lit(SITE_PERMISSIONS)}) FROM m JOIN public.sites s ON s.organization_uuid = m.organization_uuid WHERE m.is_owner OR m.is_admin
UNION ALL
SELECT op.object_type, op.object_uuid, p.codename FROM public.object_permissions op JOIN public.permissions p ON p.id = op.permission_id WHERE op.user_uuid = ?
UNION ALL
SELECT op.object_type, op.object_uuid, p.codename FROM public.object_permissions op JOIN public.permissions p ON p.id = op.permission_id JOIN g ON g.group_id = op.group_id
UNION ALL
SELECT 'organization', g.organization_uuid, p.codename FROM g JOIN public.group_permissions gp ON gp.group_id = g.group_id JOIN public.permissions p ON p.id = gp.permission_id WHERE p.model = 'organization'
UNION ALL
SELECT 'site', s.uuid, p.codename FROM g JOIN public.group_permissions gp ON gp.group_id = g.group_id JOIN public.permissions p ON p.id = gp.permission_id
  JOIN public.sites s ON s.organization_uuid = g.organization_uuid WHERE p.model = 'site'`;

export async function loadGrants(em: EntityManager, userUuid: string): Promise<Grants> {
  const rows = (await em.execute(GRANTS_SQL, [userUuid, userUuid])) as { t: 'member' | 'organization' | 'site'; o: string; p: string }[];
  const grants: Grants = { organization: new Map(), site: new Map(), memberOf: new Set() };
  for (const r of rows) {
    if (r.t === 'member') {
      grants.memberOf.add(r.o);
      continue;
    }
    const map = grants[r.t];
    let set = map.get(r.o);
    if (!set) map.set(r.o, (set = new Set()));
    set.add(r.p);
  }
  return grants;
}

/**
 * The request's ability including the grants its user holds (loaded once per context, on
 * first need): a platform user's organization and site grants, or a site user's permissions
 * in its own site (tenancy/site-grants.ts). Superusers (and site staff) need none; a site user
 * outside its own site gets nothing from them, so nothing is loaded. Services on
 * organizations, sites, secrets and secret types call this before deciding.
 */
export async function abilityWithGrants(ctx: ServiceContext): Promise<AppAbility> {
  const actor = ctx.actor;
  if (actor.kind !== 'user' || actor.is_superuser) return ctx.ability;
  if (actor.tenant) {
    if (ctx.sitePermissions || actor.is_staff || actor.tenant !== ctx.tenant) return ctx.ability;
    ctx.sitePermissions = await loadSitePermissions(ctx.em, actor.tenant, actor.uuid);
    ctx.ability = defineAbility(actor, { site: ctx.sitePermissions });
    return ctx.ability;
  }
  if (ctx.grants) return ctx.ability;
  ctx.grants = await loadGrants(ctx.em, actor.uuid);
  ctx.ability = defineAbility(actor, { platform: ctx.grants });
  return ctx.ability;
}

/** The effective permissions on one object, for `/privileges/`. */
export function effectivePermissions(ctx: ServiceContext, type: 'organization' | 'site', uuid: string): string[] {
  const all = type === 'organization' ? ORGANIZATION_PERMISSIONS : SITE_PERMISSIONS;
  if (ctx.actor.kind === 'system' || ctx.actor.is_superuser) return [...all];
  const held = ctx.grants?.[type].get(uuid) ?? new Set();
  return all.filter((p) => held.has(p));
}
