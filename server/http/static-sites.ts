// Frontend workers' hosts (docs/frontend-workers.md "Serving"): a request whose host is a
// worker's (or a preview of one of its builds) is answered here from that build's files, and
// never reaches the API, its authentication or its rate limits (a worker host has no `/api/`).
// The host resolves once per request to one build (HostResolver: cached, dropped at every
// routing change), and the build's manifest is immutable: an activation switches every later
// request at once, and no request mixes two builds. What to answer is decided by the manifest
// (shared/workers/serving.ts: files, `_redirects`, `_headers`, SPA fallback, 404.html); the bytes
// come from the site's store, small files from a bounded in-process cache.
import { Readable } from 'node:stream';
import type { Next } from 'koa';
import type { Orm } from '../../shared/db/orm.ts';
import type { HostResolver, TenantRef, WorkerTarget } from '../../shared/tenancy/host-resolver.ts';
import { quotedSchema } from '../../shared/tenancy/schema.ts';
import { blobKey } from '../../shared/workers/deploy.ts';
import { plan, planWithoutBuild, type Manifest } from '../../shared/workers/serving.ts';
import type { ObjectStore } from '../../shared/storage/objstore/types.ts';
import type { AppContext } from './types.ts';

/** Manifests kept (by build: they never change). */
const MANIFESTS = 200;
/** Bytes of small files kept in memory, and the largest file kept. */
const CACHE_BYTES = 64 * 1024 * 1024;
const CACHE_FILE_BYTES = 256 * 1024;

/** A least-recently-used map bounded by the weight of its values. */
class Lru<V> {
  private readonly map = new Map<string, { value: V; weight: number }>();
  private total = 0;
  private readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  get(key: string): V | undefined {
    const hit = this.map.get(key);
    if (!hit) return undefined;
    this.map.delete(key);
    this.map.set(key, hit);
    return hit.value;
  }
  delete(key: string): void {
    const old = this.map.get(key);
    if (!old) return;
    this.map.delete(key);
    this.total -= old.weight;
  }
  set(key: string, value: V, weight = 1): void {
    if (weight > this.max) return;
    const old = this.map.get(key);
    if (old) this.total -= old.weight;
    this.map.delete(key);
    this.map.set(key, { value, weight });
    this.total += weight;
    for (const [k, v] of this.map) {
      if (this.total <= this.max) break;
      this.map.delete(k);
      this.total -= v.weight;
    }
  }
}

export interface StaticSitesDeps {
  hosts: HostResolver;
  orm: Orm;
  store: ObjectStore;
  platformHosts: readonly string[];
}

export function staticSites(deps: StaticSitesDeps) {
  const platformHosts = new Set(deps.platformHosts);
  const manifests = new Lru<Promise<Manifest | null>>(MANIFESTS);
  const bytes = new Lru<Buffer>(CACHE_BYTES);

  const manifestOf = (schema: string, build: string): Promise<Manifest | null> => {
    const key = `${schema}/${build}`;
    let found = manifests.get(key);
    if (!found) {
      found = deps.orm.em
        .getConnection()
        .execute(`SELECT manifest FROM ${quotedSchema(schema)}.frontend_worker_builds WHERE uuid = ? AND status = 'ready'`, [build])
        .then((r) => (r[0]?.manifest as Manifest | undefined) ?? null);
      manifests.set(key, found);
      found.catch(() => manifests.delete(key)); // a failed load is not kept (the request answers its error)
    }
    return found;
  };

  const body = async (schema: string, sha256: string, encoding: 'br' | 'gzip' | null, size: number): Promise<Buffer | Readable> => {
    const key = blobKey(sha256, encoding);
    const cached = bytes.get(`${schema}/${key}`);
    if (cached) return cached;
    const stream = await deps.store.site(schema).get(key);
    if (size > CACHE_FILE_BYTES) return stream;
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    const data = Buffer.concat(chunks);
    bytes.set(`${schema}/${key}`, data, data.length);
    return data;
  };

  const serve = async (ctx: AppContext, site: TenantRef, worker: WorkerTarget) => {
    const manifest = worker.build ? await manifestOf(site.schema, worker.build) : null;
    const req = { method: ctx.method, path: ctx.path, acceptEncoding: ctx.get('Accept-Encoding'), ifNoneMatch: ctx.get('If-None-Match') };
    const decided = manifest ? plan(manifest, req, { spa: worker.spa, preview: worker.preview }) : planWithoutBuild(req);
    if (decided.kind === 'not-modified') ctx.status = 304;
    else if (decided.kind === 'redirect') {
      ctx.status = decided.status;
      ctx.set('Location', decided.location);
    } else if (decided.kind === 'empty') {
      ctx.status = decided.status;
      ctx.body = decided.message;
    } else {
      ctx.status = decided.status;
      if (!decided.head) {
        const { file, encoding } = decided;
        ctx.body = await body(site.schema, file.sha256, encoding, encoding === 'br' ? file.br! : encoding === 'gzip' ? file.gz! : file.size);
      }
    }
    ctx.set(decided.headers); // after the body: Koa's body setter chose a type and length, the plan's are the answer's
  };

  return async (ctx: AppContext, next: Next) => {
    const host = ctx.hostname.toLowerCase();
    if (platformHosts.has(host) || host.startsWith('[')) return next();
    const site = await deps.hosts.resolveHost(host);
    if (!site?.worker) return next();
    await serve(ctx, site, site.worker);
  };
}
