// "You can only grant what you hold", in one place for every path that hands out rights in an
// organization: invitations (permissions, site permissions, groups), member updates (groups,
// site grants, the admin flag) and make_admin. Groups are global (one group may be assigned
// in many organizations), so a group is grantable in an organization only when the granter
// holds there every permission the group carries, and the group holds no grant on another
// organization or on another organization's sites (it would reach beyond this organization).
import type { EntityManager } from '@mikro-orm/postgresql';
import { allows, type Subject } from '../auth/actor.ts';
import type { ServiceContext } from '../context.ts';
import { permissionDenied } from '../errors.ts';
import { abilityWithGrants, ORGANIZATION_PERMISSIONS, SITE_PERMISSIONS } from './grants.ts';

export interface Grant {
  /** Organization permissions. */
  permissions?: readonly string[];
  /** Site permissions, per site of the organization. */
  sites?: readonly { uuid: string; label: string; permissions: readonly string[] }[];
  /** Group ids. */
  groups?: readonly number[];
  /** The admin flag: everything an admin holds (every organization permission but delete, every permission on every site). */
  admin?: boolean;
}

/** Every (object, permission) the groups carry in this organization, and whether it lies outside it. */
async function groupReach(em: EntityManager, orgUuid: string, groupIds: readonly number[]) {
  const sql = `
    SELECT op.group_id AS g, g.name, op.object_type AS t, op.object_uuid AS o, p.codename AS p,
           NOT (op.object_type = 'organization' AND op.object_uuid = ?::uuid
                OR op.object_type = 'site' AND op.object_uuid IN (SELECT uuid FROM public.sites WHERE organization_uuid = ?::uuid)) AS outside
      FROM public.object_permissions op JOIN public.permissions p ON p.id = op.permission_id JOIN public.groups g ON g.id = op.group_id
     WHERE op.group_id IN (?)
    UNION ALL
    SELECT gp.group_id, g.name, 'organization', ?::uuid, p.codename, false
      FROM public.group_permissions gp JOIN public.permissions p ON p.id = gp.permission_id JOIN public.groups g ON g.id = gp.group_id
     WHERE gp.group_id IN (?) AND p.model = 'organization'
    UNION ALL
    SELECT gp.group_id, g.name, 'site', s.uuid, p.codename, false
      FROM public.group_permissions gp JOIN public.permissions p ON p.id = gp.permission_id JOIN public.groups g ON g.id = gp.group_id
      JOIN public.sites s ON s.organization_uuid = ?::uuid
     WHERE gp.group_id IN (?) AND p.model = 'site'`;
  const ids = [...groupIds];
  return (await em.execute(sql, [orgUuid, orgUuid, ids, orgUuid, ids, orgUuid, ids])) as {
    g: number;
    name: string;
    t: 'organization' | 'site';
    o: string;
    p: string;
    outside: boolean;
  }[];
}

/** 403 naming what the caller would hand out without holding it in this organization. */
export async function assertGrantable(ctx: ServiceContext, orgUuid: string, grant: Grant): Promise<void> {
  if (ctx.actor.kind === 'system' || ctx.actor.is_superuser) return;
  const ability = await abilityWithGrants(ctx);
  const missing: string[] = [];
  const check = (permission: string, type: Subject, uuid: string, label: string) => {
    if (!allows(ability, permission as never, type, { uuid })) missing.push(label);
  };
  for (const p of grant.permissions ?? []) check(p, 'Organization', orgUuid, p);
  for (const s of grant.sites ?? []) for (const p of s.permissions) check(p, 'Site', s.uuid, `${p} on site ${s.label}`);
  if (grant.groups?.length) {
    const beyond = new Set<string>();
    for (const r of await groupReach(ctx.em, orgUuid, grant.groups)) {
      if (r.outside) beyond.add(r.name);
      else check(r.p, r.t === 'organization' ? 'Organization' : 'Site', r.o, `${r.p} (group "${r.name}")`);
    }
    if (beyond.size) {
      throw permissionDenied(`Group${beyond.size > 1 ? 's' : ''} ${[...beyond].map((n) => `"${n}"`).join(', ')} ${beyond.size > 1 ? 'hold' : 'holds'} grants outside this organization and cannot be assigned in it.`);
    }
  }
  if (grant.admin) {
    for (const p of ORGANIZATION_PERMISSIONS) if (p !== 'delete_organization') check(p, 'Organization', orgUuid, p);
    const sites = (await ctx.em.execute('SELECT uuid, slug FROM public.sites WHERE organization_uuid = ?', [orgUuid])) as { uuid: string; slug: string }[];
    for (const s of sites) for (const p of SITE_PERMISSIONS) check(p, 'Site', s.uuid, `${p} on site ${s.slug}`);
  }
  if (missing.length) throw permissionDenied(`You cannot grant permissions you do not hold: ${[...new Set(missing)].join(', ')}.`);
}
