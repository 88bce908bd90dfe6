// Host → site resolution for tenant routing, cached in process so that steady-state
// requests cost no query. Only a verified domain routes (docs/domains.md): an unverified
// customer domain resolves to nothing, like an unknown host. Every change to a site or domain calls notifyRoutingChanged()
// inside its transaction; every server process drops its cache when the change commits
// (db/changes.ts), and the cache's TTL bounds the staleness should a notification be missed.
import type { EntityManager } from '@mikro-orm/postgresql';
import { CachedLookup } from '../common/cached-lookup.ts';
import { notifyChanged } from '../db/changes.ts';
import type { Orm } from '../db/orm.ts';

export interface TenantRef {
  schema: string;
  siteUuid: string;
  slug: string;
}

/** Call inside the transaction that changes a site or a domain. */
export const notifyRoutingChanged = (em: EntityManager): Promise<void> => notifyChanged(em, 'routing');

const BY_HOST = `SELECT s.schema_name, s.uuid, s.slug FROM public.domains d JOIN public.sites s ON s.uuid = d.site_uuid
  WHERE d.domain = ? AND d.is_active AND d.verified_at IS NOT NULL AND s.is_active`;
const BY_SCHEMA = 'SELECT schema_name, uuid, slug FROM public.sites WHERE schema_name = ? AND is_active';

export class HostResolver {
  private readonly orm: Orm;
  private readonly hosts: CachedLookup<TenantRef | null>;
  private readonly schemas: CachedLookup<TenantRef | null>;

  constructor(orm: Orm, options: ConstructorParameters<typeof CachedLookup>[0] = {}) {
    this.orm = orm;
    this.hosts = new CachedLookup(options);
    this.schemas = new CachedLookup(options);
  }

  /** Lookups that reached the database (tests and benchmarks read it). */
  get misses(): number {
    return this.hosts.misses + this.schemas.misses;
  }

  invalidate(): void {
    this.hosts.clear();
    this.schemas.clear();
  }

  resolveHost(host: string): Promise<TenantRef | null> {
    return this.hosts.get(host, (key) => this.load(BY_HOST, key));
  }

  resolveSchema(schema: string): Promise<TenantRef | null> {
    return this.schemas.get(schema, (key) => this.load(BY_SCHEMA, key));
  }

  private async load(sql: string, key: string): Promise<TenantRef | null> {
    const rows = await this.orm.em.getConnection().execute(sql, [key]);
    return rows[0] ? { schema: rows[0].schema_name, siteUuid: rows[0].uuid, slug: rows[0].slug } : null;
  }
}
