// Resolving `{org}` / `{site}` path references (slug or UUID) with the permission check, in
// one place for every service that works inside an organization or a site.
import type { ServiceContext } from '../context.ts';
import { allows } from '../auth/actor.ts';
import { isUuid } from '../common/slug.ts';
import { notFound, permissionDenied } from '../errors.ts';
import { abilityWithGrants, type OrganizationPermission } from '../permissions/grants.ts';
import { Organization, type OrganizationEntity } from './organization.entity.ts';

export function assertPlatform(ctx: ServiceContext): void {
  if (ctx.tenant !== null) throw notFound({ message: 'Not available on a site host.' });
}

/**
 * The organization named by slug or UUID, if the caller may `permission` it. Organizations
 * the caller cannot even view answer 404 (their existence is not disclosed); visible ones
 * without the permission answer 403.
 */
export async function organizationFor(ctx: ServiceContext, ref: string, permission: OrganizationPermission): Promise<OrganizationEntity> {
  assertPlatform(ctx);
  const org = await ctx.em.findOne(Organization, isUuid(ref) ? { uuid: ref.toLowerCase() } : { slug: ref.toLowerCase() });
  if (!org) throw notFound('Organization');
  const ability = await abilityWithGrants(ctx);
  if (!allows(ability, 'view_organization', 'Organization', org)) throw notFound('Organization');
  if (!allows(ability, permission, 'Organization', org)) throw permissionDenied();
  return org;
}
