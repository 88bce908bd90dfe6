// Domains of a site: host names routed to it, at most one primary. Every change runs in one
// transaction that first locks the site row (SELECT … FOR UPDATE), so concurrent changes of
// one site's domains serialise: "make primary" unsets the other primaries and sets this one
// with no window for a second primary (the partial unique index one_primary_domain_per_site
// backs it), and the routing notification commits with the change.
// Ownership (domain-verification.ts, docs/domains.md): a name under the base domain only as the
// site's own `{slug}.{base}`; any other name is a customer domain that routes once its DNS TXT
// record is verified, and only a verified domain may be primary (constraint
// primary_domain_verified).
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { boolFilter, likeEscape, ordering } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { isUuid } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { dropReadOnly } from '../common/read-only.ts';
import type { ServiceContext } from '../context.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';
import { siteFor } from './lookup.ts';
import { pgError } from '../common/slug.ts';
import { duplicateDomain, freeDomainSlug, type SiteSettings } from './site.create.ts';
import { claimOf, newVerificationToken, proofPublished, challengeRecord, type TxtResolver } from './domain-verification.ts';
import { Domain, type DomainEntity, type SiteEntity } from './site.entity.ts';
import { normalizeHost } from './site.naming.ts';
import { DOMAIN_COLUMNS, toDomainView, type DomainRow } from './site.queries.ts';
import { DomainCreate, DomainListQuery, DomainReplace, DomainUpdate, type DomainView } from './domain.schemas.ts';

const ORDERING_FIELDS = { domain: 'domain', is_primary: 'is_primary', is_active: 'is_active', created_at: 'created_at', modified_at: 'modified_at' };

export async function listDomains(ctx: ServiceContext, siteRef: string, rawQuery: unknown): Promise<Page<DomainView>> {
  const query = validate(DomainListQuery, rawQuery, 'query');
  const site = await siteFor(ctx, siteRef, 'view_site');
  const pageReq = parsePageRequest(query);
  const orderBy = { ...ordering(query.ordering, ORDERING_FIELDS, '-is_primary,domain'), uuid: 'asc' as const };
  const and: FilterQuery<DomainEntity>[] = [{ site_uuid: site.uuid }];
  const isActive = boolFilter(query.is_active, true);
  const isPrimary = boolFilter(query.is_primary, undefined);
  if (isActive !== undefined) and.push({ is_active: isActive });
  if (isPrimary !== undefined) and.push({ is_primary: isPrimary });
  if (query.search) and.push({ domain: { $ilike: `%${likeEscape(query.search)}%` } });
  const where = { $and: and } as never;
  const count = Number((await ctx.em.createQueryBuilder(Domain).count().where(where).execute('get', false)).count);
  const page = resolvePage(pageReq, count);
  const rows = (await ctx.em
    .createQueryBuilder(Domain)
    .select(DOMAIN_COLUMNS.split(', ') as never)
    .where(where)
    .orderBy(orderBy)
    .limit(page.pageSize)
    .offset(pageOffset(page))
    .execute('all', false)) as unknown as DomainRow[];
  return { ...page, count, results: rows.map(toDomainView) };
}

/** One domain of the site by UUID, slug or host name (slug first); 404 when absent. */
async function findDomain(em: EntityManager, siteUuid: string, ref: string, lock = false): Promise<DomainRow> {
  const forUpdate = lock ? ' FOR UPDATE' : '';
  const rows = (isUuid(ref)
    ? await em.execute(`SELECT ${DOMAIN_COLUMNS} FROM public.domains WHERE site_uuid = ? AND uuid = ?${forUpdate}`, [siteUuid, ref.toLowerCase()])
    : await em.execute(
        `SELECT ${DOMAIN_COLUMNS} FROM public.domains WHERE site_uuid = ? AND (slug = ? OR domain = ?) ORDER BY (slug = ?) DESC LIMIT 1${forUpdate}`,
        [siteUuid, ref.toLowerCase(), ref.toLowerCase(), ref.toLowerCase()],
      )) as DomainRow[];
  if (!rows[0]) throw notFound('Domain');
  return rows[0];
}

export async function getDomain(ctx: ServiceContext, siteRef: string, ref: string): Promise<DomainView> {
  const site = await siteFor(ctx, siteRef, 'view_site');
  return toDomainView(await findDomain(ctx.em, site.uuid, ref));
}

/** Runs `work` in a transaction holding the site's row lock; maps a duplicate host to 400. */
async function underSiteLock<T>(ctx: ServiceContext, site: SiteEntity, work: (tx: EntityManager) => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await ctx.em.transactional(async (t) => {
        const tx = t as EntityManager;
        const locked = await tx.execute('SELECT uuid FROM public.sites WHERE uuid = ? FOR UPDATE', [site.uuid]);
        if (!locked.length) throw notFound('Site'); // deleted meanwhile
        const result = await work(tx);
        await notifyRoutingChanged(tx);
        return result;
      });
    } catch (err) {
      const { code, constraint } = pgError(err);
      if (code === '23505' && constraint === 'domains_slug_key' && attempt < 5) continue; // a concurrent twin slug: next candidate
      if (code === '23505' && constraint === 'domains_domain_key') throw duplicateDomain();
      throw err;
    }
  }
}

/** What domain rules need: the platform's hosts and base domain, and where TXT records are read. */
export type DomainSettings = Pick<SiteSettings, 'platformHosts' | 'baseDomain'> & { txt: TxtResolver };

const unverifiedPrimary = (field: 'is_primary' | 'domain' = 'is_primary') =>
  fieldError(field, field === 'is_primary'
    ? 'An unverified domain cannot be primary: publish its TXT record (`verification`) and verify it (POST …/domains/{domain}/verify/) first.'
    : 'The primary domain cannot move to a name that is not verified: add the new name as a domain, verify it, then make it primary.');

/** The columns of a name's ownership: a platform name is verified at once, a customer's gets a token and waits. */
const ownership = (platform: boolean): [string, boolean] => [platform ? '' : newVerificationToken(), platform];

const unsetOtherPrimaries = (tx: EntityManager, siteUuid: string, keep: string | null) =>
  tx.execute('UPDATE public.domains SET is_primary = false, modified_at = now() WHERE site_uuid = ? AND is_primary AND uuid IS DISTINCT FROM ?', [siteUuid, keep]);

/**
 * POST /api/cloud/sites/{site}/domains/. `is_primary: true` makes every other domain of the
 * site non-primary (a verified domain only); a site without a primary domain gets this one as
 * its primary when it is verified (the site's own platform name).
 */
export async function createDomain(ctx: ServiceContext, siteRef: string, rawInput: unknown, settings: DomainSettings): Promise<DomainView> {
  const input = validate(DomainCreate, rawInput);
  const site = await siteFor(ctx, siteRef, 'manage_site');
  const host = normalizeHost(input.domain, settings.platformHosts);
  const { platform } = claimOf(host, site.slug, settings.baseDomain);
  if (input.is_primary === true && !platform) throw unverifiedPrimary();
  return underSiteLock(ctx, site, async (tx) => {
    const [{ n }] = await tx.execute('SELECT count(*)::int AS n FROM public.domains WHERE site_uuid = ? AND is_primary', [site.uuid]);
    const primary = input.is_primary === true || (n === 0 && platform);
    if (primary) await unsetOtherPrimaries(tx, site.uuid, null);
    const [row] = (await tx.execute(
      `INSERT INTO public.domains (uuid, slug, domain, is_primary, is_active, site_uuid, verification_token, verified_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN now() END) RETURNING ${DOMAIN_COLUMNS}`,
      [crypto.randomUUID(), await freeDomainSlug(tx, host), host, primary, input.is_active ?? true, site.uuid, ...ownership(platform)],
    )) as DomainRow[];
    return toDomainView(row);
  });
}

/**
 * PUT (`domain` required) and PATCH of /api/cloud/sites/{site}/domains/{domain}/. A new host
 * name gets a new slug and starts unverified (a customer name: a new token). Unsetting
 * `is_primary` on the primary is refused (make another one primary instead): a site keeps its
 * primary domain, and a primary domain stays verified.
 */
export async function updateDomain(ctx: ServiceContext, siteRef: string, ref: string, rawInput: unknown, settings: DomainSettings, mode: 'put' | 'patch' = 'patch'): Promise<DomainView> {
  const schema = mode === 'put' ? DomainReplace : DomainUpdate;
  const input = validate(schema, rawInput) as DomainUpdate;
  const site = await siteFor(ctx, siteRef, 'manage_site');
  const host = input.domain !== undefined ? normalizeHost(input.domain, settings.platformHosts) : undefined;
  const claim = host !== undefined ? claimOf(host, site.slug, settings.baseDomain) : undefined;
  return underSiteLock(ctx, site, async (tx) => {
    const current = await findDomain(tx, site.uuid, ref, true);
    dropReadOnly(schema, input, toDomainView(current));
    if (input.is_primary === false && current.is_primary) {
      throw fieldError('is_primary', 'A site keeps one primary domain: make another domain primary instead.');
    }
    const renamed = host !== undefined && host !== current.domain;
    const verified = renamed ? claim!.platform : current.verified_at !== null;
    if (!verified && current.is_primary) throw unverifiedPrimary('domain');
    if (!verified && input.is_primary === true) throw unverifiedPrimary();
    if (input.is_primary === true && !current.is_primary) await unsetOtherPrimaries(tx, site.uuid, current.uuid);
    const sets: string[] = ['modified_at = now()'];
    const values: unknown[] = [];
    if (renamed) {
      sets.push('domain = ?', 'slug = ?', 'verification_token = ?', 'verified_at = CASE WHEN ? THEN now() END');
      values.push(host, await freeDomainSlug(tx, host), ...ownership(claim!.platform));
    }
    for (const flag of ['is_primary', 'is_active'] as const) {
      if (input[flag] === undefined) continue;
      sets.push(`${flag} = ?`);
      values.push(input[flag]);
    }
    const [row] = (await tx.execute(`UPDATE public.domains SET ${sets.join(', ')} WHERE uuid = ? RETURNING ${DOMAIN_COLUMNS}`, [
      ...values,
      current.uuid,
    ])) as DomainRow[];
    return toDomainView(row);
  });
}

/**
 * POST …/domains/{domain}/verify/: reads the domain's TXT record now. Found: the domain is
 * verified and routes. Not found: an unverified domain stays so (400 naming the record); a
 * verified one loses its verification and stops routing at once, everywhere (if it was the
 * primary, the site's own platform name becomes primary again). A DNS failure changes nothing
 * (503). The DNS question is asked outside the transaction; the change is made only if the
 * domain is still the one checked.
 */
export async function verifyDomain(ctx: ServiceContext, siteRef: string, ref: string, settings: DomainSettings): Promise<DomainView> {
  const site = await siteFor(ctx, siteRef, 'manage_site');
  const checked = await findDomain(ctx.em, site.uuid, ref);
  if (!checked.verification_token) return toDomainView(checked); // a platform name: nothing to prove
  const published = await proofPublished(settings.txt, checked.domain, checked.verification_token);
  if (!published && checked.verified_at === null) {
    const { name, value } = challengeRecord(checked.domain, checked.verification_token);
    throw new DomainError('BAD_REQUEST', `${checked.domain} is not verified: no TXT record "${value}" at ${name}. Publish it (DNS changes can take a while to appear) and verify again.`);
  }
  return underSiteLock(ctx, site, async (tx) => {
    const current = await findDomain(tx, site.uuid, checked.uuid, true);
    if (current.domain !== checked.domain || current.verification_token !== checked.verification_token) {
      throw new DomainError('CONFLICT', 'The domain changed while its record was being checked: verify it again.');
    }
    if (published) {
      const [row] = (await tx.execute(`UPDATE public.domains SET verified_at = coalesce(verified_at, now()), modified_at = now() WHERE uuid = ? RETURNING ${DOMAIN_COLUMNS}`, [current.uuid])) as DomainRow[];
      return toDomainView(row);
    }
    const [row] = (await tx.execute(
      `UPDATE public.domains SET verified_at = NULL, is_primary = false, modified_at = now() WHERE uuid = ? RETURNING ${DOMAIN_COLUMNS}`,
      [current.uuid],
    )) as DomainRow[];
    if (current.is_primary) await restorePlatformPrimary(tx, site, settings.baseDomain);
    return toDomainView(row);
  });
}

/** The site's own `{slug}.{base}` as its primary domain (made again if it was deleted). */
async function restorePlatformPrimary(tx: EntityManager, site: SiteEntity, base: string): Promise<void> {
  const host = `${site.slug}.${base}`;
  const moved = await tx.execute('UPDATE public.domains SET is_primary = true, is_active = true, modified_at = now() WHERE site_uuid = ? AND domain = ? RETURNING uuid', [site.uuid, host]);
  if (moved.length) return;
  await tx.execute(`INSERT INTO public.domains (uuid, slug, domain, is_primary, site_uuid, verification_token, verified_at) VALUES (?, ?, ?, true, ?, '', now())`, [
    crypto.randomUUID(),
    await freeDomainSlug(tx, host),
    host,
    site.uuid,
  ]);
}

/** DELETE: a primary domain cannot be deleted (400): the site would be left without one. */
export async function deleteDomain(ctx: ServiceContext, siteRef: string, ref: string): Promise<void> {
  const site = await siteFor(ctx, siteRef, 'manage_site');
  await underSiteLock(ctx, site, async (tx) => {
    const current = await findDomain(tx, site.uuid, ref, true);
    if (current.is_primary) {
      throw new DomainError('BAD_REQUEST', 'Cannot delete the primary domain of a site: make another domain primary first.', {
        detail: 'The last primary domain of a site cannot be deleted.',
      });
    }
    await tx.execute('DELETE FROM public.domains WHERE uuid = ?', [current.uuid]);
  });
}
