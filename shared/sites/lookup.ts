import type { ServiceContext } from '../context.ts';
import { allows } from '../auth/actor.ts';
import { isUuid } from '../common/slug.ts';
import { permissionDenied, siteNotFound } from '../errors.ts';
import { assertPlatform } from '../organizations/lookup.ts';
import { abilityWithGrants, type SitePermission } from '../permissions/grants.ts';
import { Site, type SiteEntity } from './site.entity.ts';

/**
 * The WHERE clause (with its ORDER BY and LIMIT) of the one site an operator's command names
 * (backup, move): by slug, schema name or UUID, a schema name before another site's equal slug.
 * `p` is the placeholder the name is bound to, each time it appears (4 times).
 */
export const operatorSiteRef = (p: string): string => `slug = ${p} OR schema_name = ${p} OR uuid::text = ${p} ORDER BY (schema_name = ${p}) DESC LIMIT 1`;

/**
 * The site named by slug or UUID, if the caller may `permission` it (404 when it may not even view
 * it, naming it as the caller did: `named`, when the caller's name for it was another).
 */
export async function siteFor(ctx: ServiceContext, ref: string, permission: SitePermission, named = ref): Promise<SiteEntity> {
  assertPlatform(ctx);
  const site = await ctx.em.findOne(Site, isUuid(ref) ? { uuid: ref.toLowerCase() } : { slug: ref.toLowerCase() });
  if (!site) throw siteNotFound(named);
  const ability = await abilityWithGrants(ctx);
  if (!allows(ability, 'view_site', 'Site', site)) throw siteNotFound(named);
  if (!allows(ability, permission, 'Site', site)) throw permissionDenied();
  return site;
}
