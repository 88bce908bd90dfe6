// Host → site resolution for tenant routing, cached in process so that steady-state
// requests cost no query. Only a verified domain routes (docs/domains.md): an unverified
// customer domain resolves to nothing, like an unknown host. Every change to a site or domain calls notifyRoutingChanged()
// inside its transaction; every server process drops its cache when the change commits
// (db/changes.ts), and the cache's TTL bounds the staleness should a notification be missed.
import type { EntityManager } from '@mikro-orm/postgresql';
import { CachedLookup } from '../common/cached-lookup.ts';
import { notifyChanged } from '../db/changes.ts';
import { clustersOf } from '../db/clusters.ts';
import type { Orm } from '../db/orm.ts';
import type { Environment } from '../config.ts';
import { parsePreviewHost } from '../workers/hostnames.ts';
import { quotedSchema } from './schema.ts';

/** A frontend worker's host (docs/frontend-workers.md): the build it serves now (or the previewed one). */
export interface WorkerTarget {
  id: number;
  uuid: string;
  /** The build to serve: the active one, a preview's own; null when none. */
  build: string | null;
  spa: boolean;
  /** A preview address (`{build}--{subdomain}.…`): never indexed. */
  preview: boolean;
}

export interface TenantRef {
  schema: string;
  siteUuid: string;
  slug: string;
  /** The cluster that holds the site's schema (db/clusters.ts). */
  cluster: string;
  /** Set when the host is a frontend worker's: it serves static files only, never the site's API. */
  worker?: WorkerTarget;
}

/** Call inside the transaction that changes a site or a domain. */
export const notifyRoutingChanged = (em: EntityManager): Promise<void> => notifyChanged(em, 'routing');

const BY_HOST = `SELECT s.schema_name, s.uuid, s.slug, s.cluster, NULL::uuid AS worker_uuid FROM public.domains d JOIN public.sites s ON s.uuid = d.site_uuid
  WHERE d.domain = ? AND d.is_active AND d.verified_at IS NOT NULL AND s.is_active
  UNION ALL SELECT s.schema_name, s.uuid, s.slug, s.cluster, w.worker_uuid FROM public.worker_hosts w JOIN public.sites s ON s.uuid = w.site_uuid WHERE w.host = ? AND s.is_active`;
const BY_SCHEMA = 'SELECT schema_name, uuid, slug, cluster FROM public.sites WHERE schema_name = ? AND is_active';

const refOf = (row: Record<string, string>): TenantRef => ({ schema: row.schema_name!, siteUuid: row.uuid!, slug: row.slug!, cluster: row.cluster! });

export class HostResolver {
  private readonly orm: Orm;
  private readonly hosts: CachedLookup<TenantRef | null>;
  private readonly schemas: CachedLookup<TenantRef | null>;

  private readonly environment: Environment;

  /** `environment`: the deployment's (ENVIRONMENT), for the prefix of preview addresses. */
  constructor(orm: Orm, options: ConstructorParameters<typeof CachedLookup>[0] & { environment?: Environment } = {}) {
    this.orm = orm;
    this.environment = options.environment ?? 'production';
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

  /** The host's cached resolution, without a query or a promise; undefined when not cached (then resolveHost). */
  cachedHost(host: string): TenantRef | null | undefined {
    return this.hosts.peek(host);
  }

  resolveHost(host: string): TenantRef | null | Promise<TenantRef | null> {
    return this.hosts.get(host, (key) => this.loadHost(key));
  }

  resolveSchema(schema: string): TenantRef | null | Promise<TenantRef | null> {
    return this.schemas.get(schema, async (key) => {
      const [row] = await this.orm.em.getConnection().execute(BY_SCHEMA, [key]);
      return row ? refOf(row) : null;
    });
  }

  /** The pool of the cluster that holds the site's schema (opened on first use: db/clusters.ts). */
  siteOrm(ref: TenantRef): Promise<Orm> {
    return clustersOf(this.orm.em)?.orm(ref.cluster) ?? Promise.resolve(this.orm);
  }

  /** A site's domain, a worker's host, or a preview of a worker's build (`{8 hex of the build}--{worker host}`). */
  private async loadHost(host: string): Promise<TenantRef | null> {
    const [row] = await this.orm.em.getConnection().execute(BY_HOST, [host, host]);
    if (row) {
      const ref = refOf(row);
      if (!row.worker_uuid) return ref;
      const [w] = await (await this.siteOrm(ref)).em.getConnection().execute(`SELECT id, uuid, active_build_uuid, spa_fallback FROM ${quotedSchema(ref.schema)}.frontend_workers WHERE uuid = ?`, [row.worker_uuid]);
      return w ? { ...ref, worker: { id: Number(w.id), uuid: w.uuid, build: w.active_build_uuid, spa: w.spa_fallback, preview: false } } : null;
    }
    const preview = parsePreviewHost(host, this.environment);
    if (!preview) return null;
    const target = await this.resolveHost(preview.workerHost);
    if (!target?.worker || target.worker.preview) return null;
    const builds = await (await this.siteOrm(target)).em.getConnection().execute(
      `SELECT uuid FROM ${quotedSchema(target.schema)}.frontend_worker_builds WHERE worker_id = ? AND status = 'ready' AND left(replace(uuid::text, '-', ''), 8) = ? LIMIT 2`,
      [target.worker.id, preview.short],
    );
    return builds.length === 1 ? { ...target, worker: { ...target.worker, build: builds[0].uuid, preview: true } } : null;
  }
}
