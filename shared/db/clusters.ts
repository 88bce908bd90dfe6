// Several PostgreSQL clusters (docs/scale-out.md "Several clusters"). The platform's own tables
// (users, organizations, sites, domains, invitations, the registry itself) stay on the primary: the
// database the server opens (DATABASE_URL). A site's schema lives on the cluster its row names
// (`public.sites.cluster`), and with it the site's rows of the per-site tables (CLUSTER_TABLES: its
// migration version, function queue, browser sessions and idempotency keys), so that a site's
// transaction never spans two clusters.
//
// A request on a site gets the pool of that site's cluster (Clusters.orm: opened on first use,
// bounded, closed when idle); what it reads or writes of the platform's tables goes to the primary
// (platformEm). On the primary, both are the same unit of work: a platform of one cluster behaves
// exactly as before.
import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { CachedLookup } from '../common/cached-lookup.ts';
import type { ChangeListener } from './changes.ts';
import type { BoundConnection } from './driver.ts';
import { createOrm, type Orm, type OrmOptions } from './orm.ts';
import { sessionSettings, storeRoleDefaults, type SessionSettings } from './pooler.ts';
import { DATABASE_LIMITS } from '../config.ts';
import { rows } from './sql.ts';

export const PRIMARY_CLUSTER = 'primary';
export const CLUSTER_STATES = ['active', 'draining', 'read-only'] as const;
export type ClusterState = (typeof CLUSTER_STATES)[number];
const CLUSTER_NAME = /^[a-z][a-z0-9-]{0,39}$/;

export interface ClusterRow {
  name: string;
  /** Null for the primary (the server's own DATABASE_URL). */
  url: string | null;
  direct_url: string | null;
  capacity: number | null;
  state: ClusterState;
  sites: number;
}

/**
 * What a cluster other than the primary holds besides site schemas: the per-site tables (the same
 * columns as the primary's, platform migrations 0002, 0005–0007, without the foreign key to
 * `sites`, which is the primary's), the change notification function the sites' triggers call,
 * and the extensions of site schemas. Idempotent: applied by `platform cluster add` and by every
 * `platform migrate`.
 */
export const CLUSTER_TABLES: readonly string[] = [
  'CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public',
  `CREATE TABLE IF NOT EXISTS public.tenant_schemas (
    schema_name varchar(63) PRIMARY KEY,
    version integer NOT NULL DEFAULT 0,
    migrated_at timestamptz,
    last_error text
  )`,
  `CREATE OR REPLACE FUNCTION public.platform_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_NARGS = 1 THEN
      PERFORM pg_notify('platform_changes', TG_ARGV[0] || ':' || TG_TABLE_SCHEMA);
      RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
      PERFORM pg_notify('platform_changes', TG_ARGV[0] || ':' || (to_jsonb(OLD) ->> TG_ARGV[1]));
    END IF;
    IF TG_OP <> 'DELETE' THEN
      PERFORM pg_notify('platform_changes', TG_ARGV[0] || ':' || (to_jsonb(NEW) ->> TG_ARGV[1]));
    END IF;
    RETURN NULL;
  END $$`,
  `CREATE TABLE IF NOT EXISTS public.function_jobs (
    id bigserial PRIMARY KEY,
    site_schema varchar(63) NOT NULL REFERENCES public.tenant_schemas (schema_name) ON DELETE CASCADE ON UPDATE CASCADE,
    invocation_id bigint NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    locked_by text,
    locked_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
  )`,
  'CREATE INDEX IF NOT EXISTS function_jobs_claim_idx ON public.function_jobs (locked_until NULLS FIRST, id)',
  'DROP TRIGGER IF EXISTS function_jobs_queued ON public.function_jobs',
  `CREATE TRIGGER function_jobs_queued AFTER INSERT ON public.function_jobs FOR EACH ROW WHEN (NEW.locked_by IS NULL) EXECUTE FUNCTION public.platform_notify_change('function-jobs')`,
  `CREATE TABLE IF NOT EXISTS public.sessions (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    key_hash bytea NOT NULL UNIQUE,
    site_schema varchar(63) REFERENCES public.tenant_schemas (schema_name) ON DELETE CASCADE ON UPDATE CASCADE,
    user_uuid uuid NOT NULL,
    generation integer NOT NULL,
    user_agent text NOT NULL DEFAULT '',
    ip text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
  )`,
  'CREATE INDEX IF NOT EXISTS sessions_user_idx ON public.sessions (user_uuid, site_schema)',
  'CREATE INDEX IF NOT EXISTS sessions_expires_idx ON public.sessions (expires_at)',
  `CREATE TABLE IF NOT EXISTS public.idempotency_keys (
    id bigserial PRIMARY KEY,
    site_schema varchar(63) REFERENCES public.tenant_schemas (schema_name) ON DELETE CASCADE ON UPDATE CASCADE,
    principal text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    operation text NOT NULL,
    lock_token uuid,
    locked_until timestamptz,
    status integer,
    headers jsonb,
    body bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CONSTRAINT idempotency_keys_scope_key UNIQUE NULLS NOT DISTINCT (site_schema, principal, key)
  )`,
  'CREATE INDEX IF NOT EXISTS idempotency_keys_expires_idx ON public.idempotency_keys (expires_at)',
];

/** A connection URL with its password hidden (what `cluster list` and errors show). */
export function redactUrl(url: string | null): string | null {
  if (!url) return url;
  try {
    const u = new URL(url);
    if (u.password) u.password = '*****';
    return u.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** Connects to `url` once (a short timeout), runs `work`, closes. */
async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (err) {
    throw fieldError('url', `The cluster does not answer at ${redactUrl(url)}: ${(err as Error).message}`);
  }
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** `work` in a transaction of `client` under the clusters' own advisory lock: several processes may prepare one cluster at once. */
async function underClusterLock(client: pg.Client, work: () => Promise<unknown>): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext('platform:cluster-tables'))");
    await work();
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Applies CLUSTER_TABLES on a cluster's database (its direct URL). */
export async function prepareCluster(directUrl: string): Promise<void> {
  await withClient(directUrl, (client) =>
    underClusterLock(client, async () => {
      for (const sql of CLUSTER_TABLES) await client.query(sql);
    }),
  );
}

async function storeClusterRoleDefaults(directUrl: string, settings: SessionSettings): Promise<void> {
  const client = new pg.Client({ connectionString: directUrl, connectionTimeoutMillis: 5000 });
  await client.connect(); // a cluster that does not answer: the request fails as any unreachable database does (503)
  try {
    await underClusterLock(client, () => storeRoleDefaults(client, settings));
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Applies CLUSTER_TABLES on every registered cluster but the primary (`platform migrate`, a server's start). */
export async function prepareClusters(em: EntityManager): Promise<{ name: string; error: string }[]> {
  const clusters = await rows<{ name: string; url: string; direct_url: string | null }>(em, 'SELECT name, url, direct_url FROM public.clusters WHERE name <> ? ORDER BY name', [PRIMARY_CLUSTER]);
  const failed: { name: string; error: string }[] = [];
  for (const c of clusters) await prepareCluster(c.direct_url ?? c.url).catch((err: Error) => failed.push({ name: c.name, error: err.message }));
  return failed;
}

/** Which database a URL reaches: the same cluster and database name, whatever the address says. */
const IDENTITY = 'SELECT system_identifier::text AS id, current_database() AS db FROM pg_control_system()';

export interface ClusterInput {
  name: string;
  url: string;
  directUrl?: string;
  capacity?: number | null;
}

/**
 * Registers a cluster: it must answer, must not be the primary's database (nor another platform's
 * primary), and gets CLUSTER_TABLES. `primaryDirectUrl`: the primary's database, to compare.
 */
export async function addCluster(em: EntityManager, primaryDirectUrl: string, input: ClusterInput): Promise<ClusterRow> {
  if (!CLUSTER_NAME.test(input.name)) throw fieldError('name', 'A cluster name is 1–40 lower-case letters, digits and hyphens, starting with a letter.');
  if (input.name === PRIMARY_CLUSTER) throw fieldError('name', 'The primary cluster is the platform database itself; it is always registered.');
  for (const [field, value] of [['url', input.url], ['direct_url', input.directUrl]] as const) {
    if (value === undefined) continue;
    let protocol = '';
    try {
      protocol = new URL(value).protocol;
    } catch {
      /* reported below */
    }
    if (protocol !== 'postgres:' && protocol !== 'postgresql:') throw fieldError(field, 'A PostgreSQL connection URL (postgres://…) is required.');
  }
  if (input.capacity !== undefined && input.capacity !== null && (!Number.isInteger(input.capacity) || input.capacity < 0)) {
    throw fieldError('capacity', 'The capacity is a whole number of sites, 0 or more.');
  }
  if ((await rows(em, 'SELECT 1 FROM public.clusters WHERE name = ?', [input.name])).length) throw fieldError('name', `A cluster named "${input.name}" exists already.`);
  const directUrl = input.directUrl ?? input.url;
  const primary = await withClient(primaryDirectUrl, async (c) => (await c.query(IDENTITY)).rows[0]);
  await withClient(directUrl, async (client) => {
    const target = (await client.query(IDENTITY)).rows[0];
    if (target.id === primary.id && target.db === primary.db) throw fieldError('url', 'This is the primary cluster\'s database.');
    const platform = await client.query("SELECT to_regclass('public.sites') IS NOT NULL AS has");
    if (platform.rows[0].has) throw fieldError('url', 'This database holds a platform of its own (public.sites); give the cluster an empty database.');
  });
  if (input.url !== directUrl) await withClient(input.url, async () => undefined); // the pooled address answers too
  await prepareCluster(directUrl);
  await em.execute('INSERT INTO public.clusters (name, url, direct_url, capacity) VALUES (?, ?, ?, ?)', [
    input.name,
    input.url,
    input.directUrl ?? null,
    input.capacity ?? null,
  ]);
  return (await listClusters(em)).find((c) => c.name === input.name)!;
}

export function listClusters(em: EntityManager): Promise<ClusterRow[]> {
  return rows<ClusterRow>(
    em,
    `SELECT c.name, c.url, c.direct_url, c.capacity, c.state, (SELECT count(*)::int FROM public.sites s WHERE s.cluster = c.name) AS sites
     FROM public.clusters c ORDER BY c.name <> 'primary', c.name`,
  );
}

/** `drain`: no new site is placed there (its sites keep serving; move them with `platform site move`); `read-only`: the same, and marked so. */
export async function setClusterState(em: EntityManager, name: string, state: ClusterState): Promise<ClusterRow> {
  if (!CLUSTER_STATES.includes(state)) throw fieldError('state', `One of: ${CLUSTER_STATES.join(', ')}.`);
  const changed = await em.execute('UPDATE public.clusters SET state = ? WHERE name = ?', [state, name], 'run');
  if (!(changed as unknown as { affectedRows: number }).affectedRows) throw notFound('Cluster');
  return (await listClusters(em)).find((c) => c.name === name)!;
}

/**
 * Where a new site goes: `requested` when it is an active cluster; else the active cluster with
 * the fewest sites that has room (capacity unset: no limit), the primary first on a tie, then by
 * name. Run it in the site creation's transaction.
 */
export async function placeSite(em: EntityManager, requested?: string): Promise<string> {
  const clusters = await listClusters(em);
  if (requested !== undefined) {
    const c = clusters.find((x) => x.name === requested);
    if (!c) throw fieldError('cluster', `No cluster is named "${requested}".`);
    if (c.state !== 'active') throw fieldError('cluster', `The cluster "${requested}" is ${c.state}: it takes no new site.`);
    if (c.capacity !== null && c.sites >= c.capacity) throw fieldError('cluster', `The cluster "${requested}" is full (${c.sites} of ${c.capacity} sites).`);
    return c.name;
  }
  const open = clusters.filter((c) => c.state === 'active' && (c.capacity === null || c.sites < c.capacity));
  if (!open.length) throw new DomainError('CONFLICT', 'No active cluster has room for a new site (platform cluster list).');
  open.sort((a, b) => a.sites - b.sites || Number(b.name === PRIMARY_CLUSTER) - Number(a.name === PRIMARY_CLUSTER) || a.name.localeCompare(b.name));
  return open[0]!.name;
}

/** How long a cluster's pool stays open without a request (then closed; opened again on the next). */
const IDLE_CLOSE_MS = 5 * 60_000;

interface OpenCluster {
  orm: Promise<Orm>;
  /** The pool once connected. */
  ready?: Orm;
  lastUsed: number;
  directUrl: string;
}

/**
 * The pools of the clusters (one per cluster, opened on first use, `poolMax` connections each,
 * closed after IDLE_CLOSE_MS without use). The primary is the process's own pool.
 */
export class Clusters {
  readonly primary: Orm;
  private readonly open = new Map<string, OpenCluster>();
  private readonly options: OrmOptions;
  private readonly openHandlers: ((name: string, directUrl: string) => void)[] = [];
  private readonly timer: NodeJS.Timeout;
  /** The cluster of each site schema looked up (dropped when routing changes: follow()). */
  private siteClusters = new CachedLookup<string>({ ttlMs: 10_000 });

  constructor(primary: Orm, options: { orm?: OrmOptions; idleCloseMs?: number } = {}) {
    this.primary = primary;
    this.options = options.orm ?? {};
    const idle = options.idleCloseMs ?? IDLE_CLOSE_MS;
    this.timer = setInterval(() => void this.closeIdle(idle), Math.min(idle, 60_000)).unref();
    registry.set(primary.em.getConnection(), this);
  }

  /** The cluster's pool, opened when first asked for. */
  orm(name: string): Promise<Orm> {
    if (name === PRIMARY_CLUSTER) return Promise.resolve(this.primary);
    const known = this.open.get(name);
    if (known) {
      known.lastUsed = Date.now();
      return known.orm;
    }
    const entry: OpenCluster = { orm: Promise.resolve() as never, lastUsed: Date.now(), directUrl: '' };
    entry.orm = this.connect(name, entry);
    this.open.set(name, entry);
    entry.orm.catch(() => this.open.get(name) === entry && this.open.delete(name)); // the next request tries again
    return entry.orm;
  }

  /** The cluster's pool when it is open now (no query, no promise). */
  peek(name: string): Orm | undefined {
    if (name === PRIMARY_CLUSTER) return this.primary;
    const c = this.open.get(name);
    if (c) c.lastUsed = Date.now();
    return c?.ready;
  }

  /** Calls `handle` with each cluster whose pool opens (the server listens to its change notifications). */
  onOpen(handle: (name: string, directUrl: string) => void): this {
    this.openHandlers.push(handle);
    return this;
  }

  private async connect(name: string, entry: OpenCluster): Promise<Orm> {
    const [row] = await rows<{ url: string; direct_url: string | null }>(this.primary.em.fork(), 'SELECT url, direct_url FROM public.clusters WHERE name = ?', [name]);
    if (!row) throw new DomainError('SERVICE_UNAVAILABLE', `The site's cluster "${name}" is not registered.`);
    const proxied = row.direct_url !== null && row.direct_url !== row.url;
    // Behind a transaction pooler the pool sends no startup parameters: its session settings are
    // the role's defaults on that cluster's database (db/pooler.ts), set here (only what differs).
    if (proxied) await storeClusterRoleDefaults(row.direct_url!, sessionSettings(this.options.statementTimeoutMs ?? 0, this.options.limits?.idleInTransactionTimeoutMs ?? DATABASE_LIMITS.idleInTransactionTimeoutMs));
    // Named statements off through the pooler (PgBouncer in transaction mode hands each transaction any server connection).
    const orm = await createOrm(row.url, { ...this.options, proxied, preparedStatements: proxied ? false : this.options.preparedStatements, contextName: `cluster:${name}` });
    registry.set(orm.em.getConnection(), this);
    entry.directUrl = row.direct_url ?? row.url;
    entry.ready = orm;
    for (const handle of this.openHandlers) handle(name, entry.directUrl);
    return orm;
  }

  /**
   * Keeps the sites' clusters while `listener` listens, dropping them, and the registered names,
   * whenever routing changes (a site created, deleted or moved): a cluster registered a moment ago
   * is in the function queue's turns as soon as a site is made there, not up to 10 s later.
   */
  follow(listener: ChangeListener): void {
    this.siteClusters = new CachedLookup<string>({ listener });
    listener.on('routing', () => {
      this.siteClusters.clear();
      this.registered = undefined;
    });
  }

  private registered: { names: Promise<string[]>; at: number } | undefined;

  /** The names of the registered clusters, the primary first (read again after 10 s or a routing change: the function queue polls each). */
  names(): Promise<string[]> {
    if (!this.registered || Date.now() - this.registered.at > 10_000) {
      const names = rows<{ name: string }>(this.primary.em.fork(), 'SELECT name FROM public.clusters ORDER BY name <> ?, name', [PRIMARY_CLUSTER]).then((r) => r.map((c) => c.name));
      this.registered = { names, at: Date.now() };
      names.catch(() => (this.registered = undefined));
    }
    return this.registered.names;
  }

  /** The cluster that holds the site schema `schema` (the primary for a schema no site has). */
  siteCluster(schema: string): string | Promise<string> {
    return this.siteClusters.get(schema, async (key) => (await rows<{ cluster: string }>(this.primary.em.fork(), 'SELECT cluster FROM public.sites WHERE schema_name = ?', [key]))[0]?.cluster ?? PRIMARY_CLUSTER);
  }

  /** The pool of the cluster that holds the site schema `schema`. */
  async siteOrm(schema: string): Promise<Orm> {
    return this.orm(await this.siteCluster(schema));
  }

  /** Counts `orm` (another pool on the primary: a command's direct connection) as the primary's. */
  adopt(orm: Orm): void {
    registry.set(orm.em.getConnection(), this);
  }

  /** The clusters open now, with their direct URLs (readiness, listeners). */
  opened(): { name: string; directUrl: string; orm: Promise<Orm> }[] {
    return [...this.open].map(([name, c]) => ({ name, directUrl: c.directUrl, orm: c.orm }));
  }

  private async closeIdle(idleMs: number): Promise<void> {
    const now = Date.now();
    for (const [name, c] of this.open) {
      // Unused for idleMs, and no connection checked out (a long export holds one all along).
      if (now - c.lastUsed < idleMs || !c.ready || (c.ready.em.getConnection() as BoundConnection).busy > 0) continue;
      this.open.delete(name);
      await (await c.orm.catch(() => undefined))?.close(true).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    const open = [...this.open.values()];
    this.open.clear();
    await Promise.all(open.map(async (c) => (await c.orm.catch(() => undefined))?.close(true).catch(() => undefined)));
    registry.delete(this.primary.em.getConnection());
  }
}

/** Which Clusters each pool belongs to (its connection, shared by every EntityManager of that pool). */
const registry = new WeakMap<object, Clusters>();

/** The Clusters of the pool `em` comes from; undefined for a pool opened without them (tests of one module). */
export const clustersOf = (em: EntityManager): Clusters | undefined => registry.get(em.getConnection());

/**
 * Where a statement on the platform's own tables goes from `em`: `em` itself on the primary (the
 * same transaction, as on a platform of one cluster), else the primary's pool.
 */
export function platformEm(em: EntityManager): EntityManager {
  const clusters = clustersOf(em);
  if (!clusters || em.getConnection() === clusters.primary.em.getConnection()) return em;
  return clusters.primary.em;
}

/** The pool of the cluster that holds the site `schema`, from a pool of the platform's (`orm` itself when there are no clusters). */
export function siteOrmOf(orm: Orm, schema: string): Promise<Orm> {
  return clustersOf(orm.em)?.siteOrm(schema) ?? Promise.resolve(orm);
}

/**
 * Where statements on the tables of the site whose schema is `schema` go from `em` (a platform
 * request, a command): `em` itself when the site is on the primary (the same transaction), else a
 * unit of work on its cluster's pool.
 */
export async function siteEmOf(em: EntityManager, schema: string): Promise<EntityManager> {
  const clusters = clustersOf(em);
  if (!clusters) return em;
  const cluster = await clusters.siteCluster(schema);
  if (cluster === PRIMARY_CLUSTER) return em.getConnection() === clusters.primary.em.getConnection() ? em : clusters.primary.em.fork();
  return (await clusters.orm(cluster)).em.fork();
}

/**
 * `work` on every registered cluster in turn (the primary: `em` itself), for the upkeep that runs
 * over every site (pruning, storage): a cluster that fails does not stop the others; the first
 * failure is thrown once all have run. Without clusters (a pool opened alone): `em` only.
 */
export async function forEachCluster<T>(em: EntityManager, work: (clusterEm: EntityManager, name: string) => Promise<T>): Promise<T[]> {
  const clusters = clustersOf(em);
  if (!clusters) return [await work(em, PRIMARY_CLUSTER)];
  const results: T[] = [];
  let failure: unknown;
  for (const name of await clusters.names()) {
    try {
      results.push(await work(name === PRIMARY_CLUSTER ? em : (await clusters.orm(name)).em.fork(), name));
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure) throw failure;
  return results;
}
