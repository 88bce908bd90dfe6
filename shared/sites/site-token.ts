// The token exchange (POST /api/cloud/sites/{site}/token/): an organization owner or admin,
// signed in on the platform, gets the tokens of their linked user on one of the
// organization's sites (the site user that site creation and promotions seed), so that one
// platform login serves every site they administer (`platform` CLI: site commands without
// `login --site`). Everything is re-checked at the moment of the exchange: the caller's
// platform account (authentication), `admin_site` on the site through the one ability (the
// organization role or a grant), the site being active, and the linked site user being
// active, not deleted and in standing (linked-users.ts: an active owner or admin now).
import type { TokenPair } from '../auth/auth.service.ts';
import { signToken, type TokenSettings } from '../auth/tokens.ts';
import type { ServiceContext } from '../context.ts';
import { permissionDenied, siteNotFound } from '../errors.ts';
import { siteEmOf } from '../db/clusters.ts';
import { withLinkedAccount } from '../tenancy/linked-users.ts';
import { isValidSchemaName, quotedSchema } from '../tenancy/schema.ts';
import { siteFor } from './lookup.ts';
import { Site } from './site.entity.ts';

export interface SiteTokenGrant extends TokenPair {
  /** For the audit line: who got a token for which site user. */
  schema: string;
  site_user: string;
}

export async function exchangeSiteToken(ctx: ServiceContext, settings: TokenSettings, ref: string): Promise<SiteTokenGrant> {
  const actor = ctx.actor;
  if (actor.kind !== 'user' || actor.tenant) throw permissionDenied('Only a signed-in platform user exchanges a token for a site.');
  // The CLI names sites by schema; the cloud routes by slug or UUID: all three are accepted.
  const bySchema = isValidSchemaName(ref) ? await ctx.em.findOne(Site, { schema_name: ref }) : null;
  const site = await siteFor(ctx, bySchema?.uuid ?? ref, 'admin_site', ref);
  if (!site.is_active) throw siteNotFound(ref);
  const q = quotedSchema(site.schema_name);
  // The site user lives on the site's cluster (db/clusters.ts); its platform account on the primary.
  const siteEm = await siteEmOf(ctx.em, site.schema_name);
  const conn = siteEm.getConnection();
  const row = (await conn.execute(`SELECT uuid, is_active AND NOT is_deleted AS usable, token_generation, platform_user_uuid FROM ${q}.users WHERE platform_user_uuid = ?`, [actor.uuid], 'get')) as
    | { uuid: string; usable: boolean; token_generation: number; platform_user_uuid: string }
    | undefined;
  const linked = row && (await withLinkedAccount(siteEm, site.schema_name, row));
  const user = linked && { uuid: linked.uuid, usable: linked.usable && linked.standing, token_generation: linked.token_generation };
  if (!user?.usable) throw permissionDenied('You have no active administrator account on this site: sign in to the site itself.');
  await conn.execute(`UPDATE ${q}.users SET last_login = now() WHERE uuid = ?`, [user.uuid]);
  const subject = { uuid: user.uuid, token_generation: Number(user.token_generation) };
  return {
    access: signToken(settings, 'access', subject, site.schema_name),
    refresh: signToken(settings, 'refresh', subject, site.schema_name),
    schema: site.schema_name,
    site_user: user.uuid,
  };
}
