// Sites: list (all visible, or one organization's), create (site.create.ts), get, update,
// delete, privileges, and the configuration of the site a request host selects.
import { platformEm } from '../db/clusters.ts';
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { accessibleWhere } from '../auth/actor.ts';
import { boolFilter, likeEscape, ordering } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { fieldError, notFound } from '../errors.ts';
import { assertPlatform, organizationFor } from '../organizations/lookup.ts';
import { abilityWithGrants, effectivePermissions } from '../permissions/grants.ts';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';
import { afterCommit, dropSite } from './site.lifecycle.ts';
import { siteFor } from './lookup.ts';
import { Site, type SiteEntity } from './site.entity.ts';
import { siteView, siteViewBySchema, siteViews } from './site.queries.ts';
import { SiteListQuery, SiteUpdate, type Privileges, type SiteView } from './site.schemas.ts';

export { createSite, type SiteSettings } from './site.create.ts';

const ORDERING_FIELDS = { name: 'name', created_at: 'created_at', updated_at: 'modified_at', modified_at: 'modified_at' };

/**
 * GET /api/cloud/sites/ (every site the caller may view; superusers: all) and, with
 * `orgRef`, GET /api/cloud/organizations/{org}/sites/ (the visible sites of that organization).
 */
export async function listSites(ctx: ServiceContext, rawQuery: unknown, orgRef?: string): Promise<Page<SiteView>> {
  assertPlatform(ctx);
  const query = validate(SiteListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const orderBy = { ...ordering(query.ordering, ORDERING_FIELDS, 'name'), uuid: 'asc' as const };
  const and: FilterQuery<SiteEntity>[] = [];
  if (orgRef !== undefined) and.push({ organization_uuid: (await organizationFor(ctx, orgRef, 'view_organization')).uuid });
  const visible = accessibleWhere(await abilityWithGrants(ctx), 'view_site', 'Site');
  if (visible === null) return { ...resolvePage(pageReq, 0), count: 0, results: [] };
  and.push(visible as FilterQuery<SiteEntity>);
  const isActive = boolFilter(query.is_active, true);
  if (isActive !== undefined) and.push({ is_active: isActive });
  if (query.environment) and.push({ environment: query.environment });
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    and.push({ $or: [{ name: { $ilike: like } }, { schema_name: { $ilike: like } }] });
  }
  const where = { $and: and } as FilterQuery<SiteEntity>;
  const count = Number((await ctx.em.createQueryBuilder(Site).count().where(where as never).execute('get', false)).count);
  const page = resolvePage(pageReq, count);
  const rows = (await ctx.em
    .createQueryBuilder(Site)
    .select(['uuid'])
    .where(where as never)
    .orderBy(orderBy)
    .limit(page.pageSize)
    .offset(pageOffset(page))
    .execute('all', false)) as unknown as { uuid: string }[];
  return { ...page, count, results: await siteViews(ctx.em, rows.map((r) => r.uuid)) };
}

export async function getSite(ctx: ServiceContext, ref: string): Promise<SiteView> {
  const site = await siteFor(ctx, ref, 'view_site');
  return siteView(ctx.em, site.uuid);
}

const UPDATABLE = ['name', 'description', 'is_active', 'site_settings', 'environment'] as const;

/**
 * PUT/PATCH /api/cloud/sites/{site}/: the fields given change (no environment prefix on
 * update; slug, schema and domains stay). A change of `is_active` re-routes the site's hosts
 * (an inactive site answers 404 on them until it is reactivated).
 */
export async function updateSite(ctx: ServiceContext, ref: string, rawInput: unknown): Promise<SiteView> {
  const input = validate(SiteUpdate, rawInput);
  const site = await siteFor(ctx, ref, 'change_site');
  dropReadOnly(SiteUpdate, input, await siteView(ctx.em, site.uuid));
  if (input.name !== undefined) {
    input.name = input.name.trim();
    if (!input.name) throw fieldError('name', 'This field may not be blank.');
  }
  const sets: string[] = [];
  const values: unknown[] = [];
  for (const field of UPDATABLE) {
    if (input[field] === undefined) continue;
    sets.push(field === 'site_settings' ? `${field} = ?::jsonb` : `${field} = ?`);
    values.push(field === 'site_settings' ? JSON.stringify(input[field]) : input[field]);
  }
  if (sets.length) {
    await ctx.em.transactional(async (tx) => {
      await tx.execute(`UPDATE public.sites SET ${sets.join(', ')}, modified_at = now() WHERE uuid = ?`, [...values, site.uuid]);
      if (input.is_active !== undefined && input.is_active !== site.is_active) await notifyRoutingChanged(tx as EntityManager);
    });
  }
  return siteView(ctx.em, site.uuid);
}

/** DELETE /api/cloud/sites/{site}/: drops the schema with its data, the domains and the site grants (spec rule 6). */
export async function deleteSite(ctx: ServiceContext, ref: string): Promise<void> {
  const site = await siteFor(ctx, ref, 'delete_site');
  await afterCommit([await ctx.em.transactional((tx) => dropSite(tx as EntityManager, site))]);
}

/** GET /api/cloud/sites/{site}/privileges/: the caller's effective site permissions (organization role and groups included). */
export async function sitePrivileges(ctx: ServiceContext, ref: string): Promise<Privileges> {
  const site = await siteFor(ctx, ref, 'view_site');
  return { permissions: effectivePermissions(ctx, 'site', site.uuid) };
}

/**
 * GET /api/cloud/sites/config/ on a site host: the site host routing selected. Public (a
 * frontend reads it before anyone signs in), so it takes no actor; it shows the site's
 * fields and primary domain, never secrets.
 */
export async function siteConfig(em: EntityManager, tenant: string | null): Promise<SiteView> {
  if (tenant === null) throw notFound('Site');
  const view = await siteViewBySchema(platformEm(em), tenant); // the platform's tables: on the primary (db/clusters.ts)
  if (!view) throw notFound('Site');
  return view;
}
