// Removing a site and everything it owns, used by site DELETE and by the organization
// cascade. Run it inside a transaction: the schema drop, the rows and the routing
// notification commit together or not at all. A site on another cluster than the primary
// (db/clusters.ts): its rows go in the transaction, its schema once that has committed (the
// returned step; a crash before it leaves a schema no site names, never routed).
import type { EntityManager } from '@mikro-orm/postgresql';
import { clustersOf, PRIMARY_CLUSTER } from '../db/clusters.ts';
import { DomainError } from '../errors.ts';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';
import { quotedSchema } from '../tenancy/schema.ts';

/** What to run once the transaction has committed (drop the schema on its cluster), if anything. */
export type AfterCommit = (() => Promise<void>) | undefined;

export async function dropSite(em: EntityManager, site: { uuid: string; schema_name: string }): Promise<AfterCommit> {
  const [row] = (await em.execute('SELECT cluster FROM public.sites WHERE uuid = ?', [site.uuid])) as { cluster: string }[];
  const cluster = row?.cluster ?? PRIMARY_CLUSTER;
  // A move under way holds replication on two clusters (sites/site-move.ts): it ends first. A
  // finished one left the old copy on its source: it goes with the site.
  const [move] = (await em.execute('SELECT source, step FROM public.site_moves WHERE site_uuid = ?', [site.uuid])) as { source: string; step: string }[];
  if (move && move.step !== 'done') {
    throw new DomainError('CONFLICT', `The site is being moved (step ${move.step}): finish the move (platform site move --resume) or undo it (--abort) first.`);
  }
  // The clusters holding a copy of the schema: the site's, and a finished move's source.
  const holders = new Set([cluster, move?.source ?? cluster]);
  if (holders.has(PRIMARY_CLUSTER)) await em.execute(`DROP SCHEMA IF EXISTS ${quotedSchema(site.schema_name)} CASCADE`);
  await em.execute(`DELETE FROM public.object_permissions WHERE object_type = 'site' AND object_uuid = ?`, [site.uuid]);
  await em.execute('DELETE FROM public.domains WHERE site_uuid = ?', [site.uuid]);
  await em.execute('DELETE FROM public.tenant_schemas WHERE schema_name = ?', [site.schema_name]);
  await em.execute('DELETE FROM public.sites WHERE uuid = ?', [site.uuid]);
  await notifyRoutingChanged(em);
  const elsewhere = [...holders].filter((c) => c !== PRIMARY_CLUSTER);
  if (!elsewhere.length) return undefined;
  const clusters = clustersOf(em)!;
  return async () => {
    for (const name of elsewhere) {
      const orm = await clusters.orm(name);
      await orm.em.fork().transactional(async (tx) => {
        await tx.execute(`DROP SCHEMA IF EXISTS ${quotedSchema(site.schema_name)} CASCADE`);
        await tx.execute('DELETE FROM public.tenant_schemas WHERE schema_name = ?', [site.schema_name]);
      });
    }
  };
}

/** Runs the steps dropSite returned, after the commit. */
export async function afterCommit(steps: AfterCommit[]): Promise<void> {
  for (const step of steps) await step?.();
}
