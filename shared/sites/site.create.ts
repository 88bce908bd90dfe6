// Site creation (spec Part 1 §2, Site rules 1–5), all or nothing in ONE transaction: the
// site row, `CREATE SCHEMA`, the tenant migrations, the default data, the primary domain and
// the routing notification commit together, or nothing is left behind (no row, no schema,
// no domain). Unique indexes decide under concurrent creates: a generated slug or schema
// name taken meanwhile is retried with the next candidate; a supplied one is a 400.
// The primary domain is always the site's own `{slug}.{base}` (the platform's, verified); a
// supplied customer domain is added beside it, unverified, until its DNS record proves it
// (docs/domains.md).
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.ts';
import type { ServiceContext } from '../context.ts';
import { likeEscape } from '../common/filters.ts';
import { nextSlug, pgError, slugify } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { checkQuota, exemptFromQuotas } from '../common/quota.ts';
import { longTransaction } from '../db/long-operations.ts';
import { fieldError, notFound } from '../errors.ts';
import { organizationFor } from '../organizations/lookup.ts';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';
import { migrateTenantSchema } from '../tenancy/migrations.ts';
import { clustersOf, placeSite, PRIMARY_CLUSTER } from '../db/clusters.ts';
import { assertSchemaName, quotedSchema } from '../tenancy/schema.ts';
import { seedTenantSchema } from '../tenancy/seed.ts';
import { DEFAULT_SITE_ENVIRONMENT, domainSlug, nextSchemaName, normalizeHost, prefixedName, schemaBase } from './site.naming.ts';
import { claimOf, newVerificationToken } from './domain-verification.ts';
import { siteView } from './site.queries.ts';
import { SiteCreate, type SiteView } from './site.schemas.ts';

/** What site rules need from the deployment: ENVIRONMENT, PLATFORM_BASE_DOMAIN, PLATFORM_HOSTS. */
export type SiteSettings = Pick<Config, 'environment' | 'baseDomain' | 'platformHosts' | 'quotas'>;

export const duplicateDomain = () => fieldError('domain', 'A domain with this host name already exists.');

async function takenSlugs(em: EntityManager, base: string): Promise<string[]> {
  const rows = await em.execute('SELECT slug FROM public.sites WHERE slug = ? OR slug LIKE ?', [base, `${likeEscape(base)}-%`]);
  return rows.map((r) => r.slug as string);
}

/** Schema names in use: by sites, and by any schema of the database (a site may not adopt one). */
async function takenSchemas(em: EntityManager, base: string): Promise<string[]> {
  const like = `${likeEscape(base.slice(0, 50))}%`;
  const rows = await em.execute('SELECT schema_name AS n FROM public.sites WHERE schema_name LIKE ? UNION SELECT nspname FROM pg_namespace WHERE nspname LIKE ?', [like, like]);
  return rows.map((r) => r.n as string);
}

const domainTaken = async (em: EntityManager, host: string): Promise<boolean> => (await em.execute('SELECT 1 FROM public.domains WHERE domain = ?', [host])).length > 0;

/** A free domain slug for `host` (dots → hyphens; `-2` on the rare collision, `a-b.x` vs `a.b.x`). */
export async function freeDomainSlug(em: EntityManager, host: string): Promise<string> {
  const base = domainSlug(host);
  const rows = await em.execute('SELECT slug FROM public.domains WHERE slug = ? OR slug LIKE ?', [base, `${likeEscape(base)}-%`]);
  return nextSlug(base, rows.map((r) => r.slug as string));
}

interface Plan {
  organizationUuid: string;
  slug: string;
  name: string;
  description: string;
  schema: string;
  environment: string;
  settings: Record<string, unknown>;
  /** The site's own `{slug}.{base}`: its primary domain. */
  host: string;
  /** A customer domain supplied on create: added unverified. */
  customHost?: string;
  /** The cluster asked for (`platform site create --cluster`); else placed by db/clusters.ts placeSite. */
  cluster?: string;
}

/**
 * The site's schema on a cluster other than the primary: created, migrated and seeded there in a
 * transaction of its own, committed before the primary's (which holds the site row). Returns the
 * undo: should the primary's transaction not commit, the schema is dropped again. (A crash between
 * the two leaves an empty schema there that no site names: never routed, and its name is skipped
 * by the next creation, which fails on it and takes the next candidate.)
 */
async function createOnCluster(tx: EntityManager, cluster: string, plan: Plan): Promise<() => Promise<void>> {
  const target = await clustersOf(tx)!.orm(cluster);
  await target.em.fork().transactional(async (ctx) => {
    await ctx.execute(`CREATE SCHEMA ${quotedSchema(plan.schema)}`);
    await migrateTenantSchema(ctx, plan.schema, { create: true });
    await seedTenantSchema(ctx, plan.schema, plan.organizationUuid);
  });
  return async () => {
    await target.em.fork().transactional(async (ctx) => {
      await ctx.execute(`DROP SCHEMA IF EXISTS ${quotedSchema(plan.schema)} CASCADE`);
      await ctx.execute('DELETE FROM public.tenant_schemas WHERE schema_name = ?', [plan.schema]);
    });
  };
}

async function createInTransaction(tx: EntityManager, plan: Plan, sitesQuota: number, undo: (() => Promise<void>)[]): Promise<string> {
  // The organization's row lock serialises concurrent creates (and a concurrent delete); the
  // count is a statement of its own, so it sees what the create that held the lock committed.
  if (!(await tx.execute('SELECT 1 FROM public.organizations WHERE uuid = ? FOR UPDATE', [plan.organizationUuid])).length) throw notFound('Organization');
  const [{ n }] = (await tx.execute('SELECT count(*)::int AS n FROM public.sites WHERE organization_uuid = ?', [plan.organizationUuid])) as { n: number }[];
  checkQuota(n, sitesQuota, 'sites per organization');
  const cluster = await placeSite(tx, plan.cluster);
  const uuid = crypto.randomUUID();
  await tx.execute(
    `INSERT INTO public.sites (uuid, slug, name, description, schema_name, environment, site_settings, organization_uuid, cluster)
     VALUES (?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?)`,
    [uuid, plan.slug, plan.name, plan.description, plan.schema, plan.environment, JSON.stringify(plan.settings), plan.organizationUuid, cluster],
  );
  if (cluster === PRIMARY_CLUSTER) {
    await tx.execute(`CREATE SCHEMA ${quotedSchema(plan.schema)}`); // no IF NOT EXISTS: never adopt a schema
    await migrateTenantSchema(tx, plan.schema, { create: true });
    await seedTenantSchema(tx, plan.schema, plan.organizationUuid);
  } else {
    undo.push(await createOnCluster(tx, cluster, plan));
  }
  await tx.execute(`INSERT INTO public.domains (uuid, slug, domain, is_primary, site_uuid, verified_at) VALUES (?, ?, ?, true, ?, now())`, [
    crypto.randomUUID(),
    await freeDomainSlug(tx, plan.host),
    plan.host,
    uuid,
  ]);
  if (plan.customHost) {
    await tx.execute('INSERT INTO public.domains (uuid, slug, domain, is_primary, site_uuid, verification_token) VALUES (?, ?, ?, false, ?, ?)', [
      crypto.randomUUID(),
      await freeDomainSlug(tx, plan.customHost),
      plan.customHost,
      uuid,
      newVerificationToken(),
    ]);
  }
  await notifyRoutingChanged(tx);
  return uuid;
}

export async function createSite(
  ctx: ServiceContext,
  orgRef: string,
  rawInput: unknown,
  settings: SiteSettings,
): Promise<SiteView> {
  const input = validate(SiteCreate, rawInput);
  if (input.cluster !== undefined && ctx.actor.kind !== 'system' && !ctx.actor.is_superuser) throw fieldError('cluster', 'Only a platform superuser chooses the cluster of a site.');
  const org = await organizationFor(ctx, orgRef, 'manage_organization');
  const trimmed = input.name.trim();
  if (!trimmed) throw fieldError('name', 'This field may not be blank.');
  const name = prefixedName(trimmed, settings.environment);
  const schema = input.schema_name !== undefined ? assertSchemaName(input.schema_name) : undefined;
  const host = input.domain !== undefined ? normalizeHost(input.domain, settings.platformHosts) : undefined;
  const slugBase = slugify(name) || 'site';
  const base = schemaBase(name);
  // Slugs not to take: `config` (the path /api/cloud/sites/config/ is the site-config route), and
  // slugs whose generated host turned out to be taken by another site's domain.
  const skipSlugs = new Set<string>(['config']);
  for (let attempt = 0; ; attempt++) {
    const slug = nextSlug(slugBase, [...(await takenSlugs(ctx.em, slugBase)), ...skipSlugs]);
    // A supplied name under the base domain must be this site's own; any other is a customer's.
    const custom = host !== undefined && !claimOf(host, slug, settings.baseDomain).platform ? host : undefined;
    const plan: Plan = {
      organizationUuid: org.uuid,
      slug,
      name,
      description: input.description ?? '',
      schema: schema ?? nextSchemaName(base, await takenSchemas(ctx.em, base)),
      environment: input.environment ?? DEFAULT_SITE_ENVIRONMENT[settings.environment],
      settings: input.site_settings ?? {},
      host: `${slug}.${settings.baseDomain}`,
      customHost: custom,
      cluster: input.cluster,
    };
    const undo: (() => Promise<void>)[] = [];
    let uuid: string;
    try {
      const quota = exemptFromQuotas(ctx.actor) ? 0 : settings.quotas.sitesPerOrganization;
      // One organization's site creations share its slots (the platform has no site to count them against).
      uuid = await longTransaction(ctx, (tx) => createInTransaction(tx, plan, quota, undo), `organization:${org.uuid}`);
    } catch (err) {
      for (const step of undo) await step().catch(() => undefined); // unreachable: an empty schema no site names is left there
      const { code, constraint } = pgError(err);
      const retry = attempt < 20;
      if (code === '23505' && constraint === 'sites_slug_key' && retry) continue;
      if ((code === '42P06' || (code === '23505' && constraint === 'sites_schema_name_key')) && !schema && retry) continue;
      if (code === '23505' && constraint === 'domains_slug_key' && retry) continue;
      if (code === '23505' && constraint === 'domains_domain_key' && !(custom && (await domainTaken(ctx.em, custom))) && retry) {
        skipSlugs.add(slug); // the generated name was claimed before names under the base domain were the platform's
        continue;
      }
      if (code === '23505' && constraint === 'sites_schema_name_key') throw fieldError('schema_name', 'A site with this schema name already exists.');
      if (code === '42P06') throw fieldError('schema_name', 'A schema with this name already exists in the database.');
      if (code === '23505' && constraint === 'domains_domain_key') throw duplicateDomain();
      throw err;
    }
    return siteView(ctx.em, uuid);
  }
}
