// Frontend workers' hosts (docs/frontend-workers.md "Serving"): a request whose host is a
// worker's (or a preview of one of its builds) is answered here from that build's files, and
// never reaches the API, its authentication or its rate limits (a worker host has no `/api/`).
// The host resolves once per request to one build (HostResolver: cached, dropped at every
// routing change), and the build's manifest is immutable: an activation switches every later
// request at once, and no request mixes two builds. What to answer is decided by the manifest
// (shared/workers/serving.ts: files, `_redirects`, `_headers`, SPA fallback, 404.html); the bytes
// come from the site's store, small files from a bounded in-process cache. Plain Node, before the
// Koa application: a request whose host, manifest, answer and bytes are all cached is answered
// synchronously (docs/benchmarks.md "Frontend workers": the throughput against nginx).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { buffer } from 'node:stream/consumers';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '../../shared/common/logger.ts';
import { isDatabaseUnavailable } from '../../shared/db/errors.ts';
import type { HostResolver, TenantRef, WorkerTarget } from '../../shared/tenancy/host-resolver.ts';
import { quotedSchema } from '../../shared/tenancy/schema.ts';
import { blobKey } from '../../shared/workers/deploy.ts';
import { plan, planWithoutBuild, type Manifest, type ServePlan } from '../../shared/workers/serving.ts';
import { wholeBytes, type ObjectStore } from '../../shared/storage/objstore/types.ts';
import { requestHost } from './tenancy.ts';

/** Manifests kept (by build: they never change). */
const MANIFESTS = 200;
/** Answers decided, kept (by build, request line and negotiation headers). */
const PLANS = 10_000;
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
  store: ObjectStore;
  platformHosts: readonly string[];
  /** TRUST_PROXY: the host is X-Forwarded-Host's, as for every other decision (requestHost). */
  trustProxy: boolean;
  log: Logger;
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/** The raw URL's path, without the query (absolute-form targets too), as sent: percent-encoded. */
function pathOf(url: string): string {
  if (url.startsWith('/')) {
    const q = url.indexOf('?');
    return q < 0 ? url : url.slice(0, q);
  }
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

/**
 * The server's first listener: a worker host's request is answered here, in plain Node (no Koa
 * context, no request id, no request log: static hosting costs what it must); any other goes to
 * `next`, the API application.
 */
export function staticSites(deps: StaticSitesDeps): (req: IncomingMessage, res: ServerResponse, next: Listener) => void {
  const platformHosts = new Set(deps.platformHosts);
  /** Manifests by build: the load (shared by concurrent requests), and the manifest once loaded (for the synchronous path). */
  const manifests = new Lru<{ load: Promise<Manifest | null>; manifest?: Manifest }>(MANIFESTS);
  const bytes = new Lru<Buffer>(CACHE_BYTES);
  // A plan is a pure function of the build (immutable) and the request's method, path and
  // negotiation headers: the answers to repeated requests are decided once.
  const plans = new Lru<ServePlan>(PLANS);

  const manifestOf = (site: TenantRef, build: string): Promise<Manifest | null> => {
    const schema = site.schema;
    const key = `${schema}/${build}`;
    const known = manifests.get(key);
    if (known) return known.load;
    const entry: { load: Promise<Manifest | null>; manifest?: Manifest } = {
      // On the site's cluster (db/clusters.ts).
      load: deps.hosts
        .siteOrm(site)
        .then((orm) => orm.em.getConnection().execute(`SELECT manifest FROM ${quotedSchema(schema)}.frontend_worker_builds WHERE uuid = ? AND status = 'ready'`, [build]))
        .then((r) => (entry.manifest = (r[0]?.manifest as Manifest | undefined)) ?? null),
    };
    manifests.set(key, entry);
    entry.load.catch(() => manifests.delete(key)); // a failed load is not kept (the request answers its error)
    return entry.load;
  };

  /** What to answer: the cached plan, else decided now. */
  const decide = (req: IncomingMessage, site: TenantRef, worker: WorkerTarget, manifest: Manifest | null): ServePlan => {
    const header = (name: string) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    const request = { method: req.method ?? 'GET', path: pathOf(req.url ?? '/'), acceptEncoding: header('accept-encoding'), ifNoneMatch: header('if-none-match') };
    if (!manifest) return planWithoutBuild(request);
    const key = `${site.schema}/${worker.build}|${worker.spa}|${worker.preview}|${request.method}|${request.path}|${request.acceptEncoding ?? ''}|${request.ifNoneMatch ?? ''}`;
    const known = plans.get(key);
    if (known) return known;
    const decided = plan(manifest, request, { spa: worker.spa, preview: worker.preview });
    plans.set(key, decided);
    return decided;
  };

  /** A file's bytes from the store (small ones kept), then the answer. */
  const sendFile = async (res: ServerResponse, schema: string, decided: Extract<ServePlan, { kind: 'file' }>, key: string) => {
    const { file, encoding } = decided;
    const size = encoding === 'br' ? file.br! : encoding === 'gzip' ? file.gz! : file.size;
    const stream = await deps.store.site(schema).get(key);
    if (size > CACHE_FILE_BYTES) {
      res.writeHead(decided.status, decided.headers);
      return pipeline(stream, res);
    }
    const data = wholeBytes(stream) ?? (await buffer(stream)); // the filesystem store's small files come read whole
    bytes.set(`${schema}/${key}`, data, data.length);
    res.writeHead(decided.status, decided.headers).end(data);
  };

  /** Answers the request from `manifest`: at once when the bytes are cached, else once they are read. */
  const respond = (req: IncomingMessage, res: ServerResponse, site: TenantRef, worker: WorkerTarget, manifest: Manifest | null): void => {
    const decided = decide(req, site, worker, manifest);
    switch (decided.kind) {
      case 'not-modified':
        return void res.writeHead(304, decided.headers).end();
      case 'redirect':
        return void res.writeHead(decided.status, { ...decided.headers, Location: decided.location }).end();
      case 'empty':
        return void res.writeHead(decided.status, decided.headers).end(req.method === 'HEAD' ? undefined : decided.message);
    }
    if (decided.head) return void res.writeHead(decided.status, decided.headers).end();
    const key = blobKey(decided.file.sha256, decided.encoding);
    const cached = bytes.get(`${site.schema}/${key}`);
    if (cached) return void res.writeHead(decided.status, decided.headers).end(cached);
    sendFile(res, site.schema, decided, key).catch((err: unknown) => failed(res, err));
  };

  const failed = (res: ServerResponse, err: unknown) => {
    const unavailable = isDatabaseUnavailable(err);
    if (!unavailable) deps.log.error({ err }, 'static site request failed');
    if (res.headersSent) return void res.destroy();
    res.writeHead(unavailable ? 503 : 500, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store', ...(unavailable && { 'Retry-After': '5' }) });
    res.end(unavailable ? 'Service temporarily unavailable: retry in a moment.' : 'Internal error.');
  };

  return (req, res, next) => {
    const host = requestHost(req, deps.trustProxy);
    if (host === '' || platformHosts.has(host) || host.includes(':')) return next(req, res);
    // The hot path, everything cached (host, manifest, plan, bytes): answered without a promise.
    const site = deps.hosts.cachedHost(host);
    if (site === null || (site && !site.worker)) return next(req, res);
    const manifest = site?.worker?.build ? manifests.get(`${site.schema}/${site.worker.build}`)?.manifest : undefined;
    if (site?.worker && manifest) {
      try {
        respond(req, res, site, site.worker, manifest);
      } catch (err) {
        failed(res, err);
      }
      return;
    }
    Promise.resolve(deps.hosts.resolveHost(host))
      .then(async (site) => {
        if (!site?.worker) return next(req, res);
        respond(req, res, site, site.worker, site.worker.build ? await manifestOf(site, site.worker.build) : null);
      })
      .catch((err: unknown) => failed(res, err));
  };
}
