import type { ServiceContext } from '../context.ts';
import { allows } from '../auth/actor.ts';
import { isUuid } from '../common/slug.ts';
import { notFound, permissionDenied } from '../errors.ts';
import { assertPlatform } from '../organizations/lookup.ts';
import { abilityWithGrants, type SitePermission } from '../permissions/grants.ts';
import { Site, type SiteEntity } from './site.entity.ts';

/** The site named by slug or UUID, if the caller may `permission` it (404 when it may not even view it). */
export async function siteFor(ctx: ServiceContext, ref: string, permission: SitePermission): Promise<SiteEntity> {
  assertPlatform(ctx);
  const site = await ctx.em.findOne(Site, isUuid(ref) ? { uuid: ref.toLowerCase() } : { slug: ref.toLowerCase() });
  if (!site) throw notFound('Site');
  const ability = await abilityWithGrants(ctx);
  if (!allows(ability, 'view_site', 'Site', site)) throw notFound('Site');
  if (!allows(ability, permission, 'Site', site)) throw permissionDenied();
  return site;
}
