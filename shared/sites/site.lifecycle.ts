// Removing a site and everything it owns, used by site DELETE and by the organization
// cascade. Run it inside a transaction: the schema drop, the rows and the routing
// notification commit together or not at all.
import type { EntityManager } from '@mikro-orm/postgresql';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';
import { quotedSchema } from '../tenancy/schema.ts';

export async function dropSite(em: EntityManager, site: { uuid: string; schema_name: string }): Promise<void> {
  await em.execute(`DROP SCHEMA IF EXISTS ${quotedSchema(site.schema_name)} CASCADE`);
  await em.execute(`DELETE FROM public.object_permissions WHERE object_type = 'site' AND object_uuid = ?`, [site.uuid]);
  await em.execute('DELETE FROM public.domains WHERE site_uuid = ?', [site.uuid]);
  await em.execute('DELETE FROM public.tenant_schemas WHERE schema_name = ?', [site.schema_name]);
  await em.execute('DELETE FROM public.sites WHERE uuid = ?', [site.uuid]);
  await notifyRoutingChanged(em);
}
