// Test utility: a site with its schema migrated and a domain, made straight in the database
// (for suites that need a tenant without going through the sites API).
import { randomBytes, randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { migrateTenantSchema } from '../tenancy/migrations.ts';
import { clustersOf, placeSite, PRIMARY_CLUSTER } from '../db/clusters.ts';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';

export interface TestSite {
  uuid: string;
  organizationUuid: string;
  schema: string;
  slug: string;
  domain: string;
}

export async function createTestSite(em: EntityManager, options: { ownerUuid?: string; name?: string } = {}): Promise<TestSite> {
  const suffix = randomBytes(4).toString('hex');
  const site: TestSite = {
    uuid: randomUUID(),
    organizationUuid: randomUUID(),
    schema: `site_${suffix}`,
    slug: `site-${suffix}`,
    domain: `site-${suffix}.localhost`,
  };
  await em.transactional(async (tx) => {
    await tx.execute('INSERT INTO public.organizations (uuid, name, slug) VALUES (?, ?, ?)', [site.organizationUuid, `Org ${suffix}`, `org-${suffix}`]);
    if (options.ownerUuid) {
      await tx.execute('INSERT INTO public.organization_members (uuid, organization_uuid, user_uuid, is_admin, is_owner) VALUES (?, ?, ?, true, true)', [
        randomUUID(),
        site.organizationUuid,
        options.ownerUuid,
      ]);
    }
    // Placed as site creation places it (db/clusters.ts): on the primary unless clusters are registered.
    const cluster = await placeSite(tx as EntityManager);
    await tx.execute(`INSERT INTO public.sites (uuid, slug, name, schema_name, environment, organization_uuid, cluster) VALUES (?, ?, ?, ?, 'production', ?, ?)`, [
      site.uuid,
      site.slug,
      options.name ?? `Site ${suffix}`,
      site.schema,
      site.organizationUuid,
      cluster,
    ]);
    // The site's own name under the base domain (localhost): the platform's, verified at once.
    await tx.execute(`INSERT INTO public.domains (uuid, slug, domain, is_primary, site_uuid, verified_at) VALUES (?, ?, ?, true, ?, now())`, [
      randomUUID(),
      site.domain.replace(/\./g, '-'),
      site.domain,
      site.uuid,
    ]);
    if (cluster === PRIMARY_CLUSTER) await migrateTenantSchema(tx as EntityManager, site.schema, { create: true });
    else await migrateTenantSchema((await clustersOf(tx as EntityManager)!.orm(cluster)).em.fork(), site.schema, { create: true });
    await notifyRoutingChanged(tx as EntityManager);
  });
  return site;
}
