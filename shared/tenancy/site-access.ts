// Decisions inside a site go through the request's one ability (auth/actor.ts), on the site
// subjects: the check before a lookup (`siteSchemaFor`: "may the actor do this to some App of
// this site at all?") and the check on the subject once found (`authorizeSiteSubject`, with the
// attributes a per-app policy will match on). docs/architecture.md "How authorization is decided".
import { authorize, SITE_GRANT_SUBJECTS, type Action, type AppAbility, type SiteSubject, type SiteSubjects } from '../auth/actor.ts';
import type { ServiceContext } from '../context.ts';
import { notFound } from '../errors.ts';
import { abilityWithGrants } from '../permissions/grants.ts';
import { assertSchemaName } from './schema.ts';

/**
 * The schema of the site the call works in: ctx.tenant (host routing or the CLI's --site),
 * never a name from the request; 404 on the platform host. It decides nothing.
 */
export function tenantSchema(ctx: ServiceContext): string {
  if (ctx.tenant === null) throw notFound({ message: 'Only available on a site host.' });
  return assertSchemaName(ctx.tenant);
}

/**
 * The request's ability for decisions on `type`: with the site user's permissions when that
 * subject's rules come from them (loaded once per request, on the first such decision); the
 * records path and the other subjects never wait for that query.
 */
export async function siteAbility(ctx: ServiceContext, type: SiteSubject): Promise<AppAbility> {
  return SITE_GRANT_SUBJECTS.has(type) ? abilityWithGrants(ctx) : ctx.ability;
}

/** A site subject's attributes as far as they are known where the check is made (always its site). */
export type SiteAttributes<T extends SiteSubject> = Partial<SiteSubjects[T]> & { schema: string };

/**
 * The check before a lookup: the site's schema, if the actor may `action` some `type` in this
 * site; 404 off a site, 403 otherwise — before any "not found", so a caller without the right
 * learns nothing of what exists (a non-admin updating an unknown app gets 403).
 */
export async function siteSchemaFor(ctx: ServiceContext, action: Action, type: SiteSubject): Promise<string> {
  const schema = tenantSchema(ctx);
  authorize(await siteAbility(ctx, type), action, type, { schema });
  return schema;
}

/** The check on a subject once looked up (or about to be created): 403 unless allowed (`field`: that field of it). */
export async function authorizeSiteSubject<T extends SiteSubject>(
  ctx: ServiceContext,
  action: Action,
  type: T,
  attributes: SiteAttributes<T>,
  field?: string,
): Promise<void> {
  authorize(await siteAbility(ctx, type), action, type, attributes, field);
}
