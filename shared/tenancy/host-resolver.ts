// Host → site resolution for tenant routing, cached in process so that steady-state
// requests cost no query. Every change to a site or domain calls notifyRoutingChanged()
// inside its transaction; PostgreSQL delivers the NOTIFY at commit to every server process
// listening on the channel (no Redis needed), and each drops its cache. A TTL bounds the
// staleness should a notification be missed while a listener reconnects.
import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Orm } from '../db/orm.ts';

export const ROUTING_CHANNEL = 'platform_routing';

export interface TenantRef {
  schema: string;
  siteUuid: string;
  slug: string;
}

/** Call inside the transaction that changes a site or a domain. */
export async function notifyRoutingChanged(em: EntityManager): Promise<void> {
  await em.execute(`SELECT pg_notify('${ROUTING_CHANNEL}', '')`);
}

const BY_HOST = `SELECT s.schema_name, s.uuid, s.slug FROM public.domains d JOIN public.sites s ON s.uuid = d.site_uuid
  WHERE d.domain = ? AND d.is_active AND s.is_active`;
const BY_SCHEMA = 'SELECT schema_name, uuid, slug FROM public.sites WHERE schema_name = ? AND is_active';

interface Entry {
  ref: TenantRef | null;
  at: number;
}

export class HostResolver {
  private readonly orm: Orm;
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private hosts = new Map<string, Entry>();
  private schemas = new Map<string, Entry>();
  private listener: pg.Client | undefined;
  private stopped = false;
  /** Lookups that reached the database (tests and benchmarks read it). */
  misses = 0;

  constructor(orm: Orm, options: { ttlMs?: number; maxEntries?: number } = {}) {
    this.orm = orm;
    this.ttlMs = options.ttlMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 10_000;
  }

  invalidate(): void {
    this.hosts = new Map();
    this.schemas = new Map();
  }

  resolveHost(host: string): Promise<TenantRef | null> {
    return this.lookup(this.hosts, host, BY_HOST);
  }

  resolveSchema(schema: string): Promise<TenantRef | null> {
    return this.lookup(this.schemas, schema, BY_SCHEMA);
  }

  private async lookup(cache: Map<string, Entry>, key: string, sql: string): Promise<TenantRef | null> {
    const hit = cache.get(key);
    const now = Date.now();
    if (hit && now - hit.at < this.ttlMs) return hit.ref;
    this.misses++;
    const rows = await this.orm.em.getConnection().execute(sql, [key]);
    const ref: TenantRef | null = rows[0] ? { schema: rows[0].schema_name, siteUuid: rows[0].uuid, slug: rows[0].slug } : null;
    if (cache.size >= this.maxEntries) cache.clear(); // unknown hosts must not grow it without bound
    cache.set(key, { ref, at: now });
    return ref;
  }

  /** Listens for routing changes on a connection of its own; reconnects when it drops. */
  async listen(url: string, onError: (err: Error) => void = () => undefined): Promise<void> {
    const connect = async () => {
      const client = new pg.Client({ connectionString: url });
      client.on('notification', () => this.invalidate());
      client.on('error', (err) => {
        onError(err);
        client.end().catch(() => undefined);
      });
      client.on('end', () => {
        if (this.listener !== client || this.stopped) return;
        this.listener = undefined;
        this.invalidate(); // notifications may have been missed
        setTimeout(() => void connect().catch(onError), 1000).unref();
      });
      await client.connect();
      await client.query(`LISTEN ${ROUTING_CHANNEL}`);
      this.listener = client;
      this.invalidate();
    };
    await connect();
  }

  async close(): Promise<void> {
    this.stopped = true;
    const client = this.listener;
    this.listener = undefined;
    await client?.end().catch(() => undefined);
  }
}
