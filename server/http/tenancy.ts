// Host routing: the request's host (port ignored) selects the platform API (PLATFORM_HOSTS)
// or a site (its active domains). On a platform host, `/sites/{schema_name}/api/...` reaches
// that site's API too. Unknown hosts get 404 in the standard envelope.
import type { IncomingMessage } from 'node:http';
import type { Next } from 'koa';
import type { Config } from '../../shared/config.ts';
import { notFound, siteNotFound } from '../../shared/errors.ts';
import { PRIMARY_CLUSTER } from '../../shared/db/clusters.ts';
import type { HostResolver, TenantRef } from '../../shared/tenancy/host-resolver.ts';
import type { WriteGate } from '../../shared/sites/move-gate.ts';
import { SAFE_METHODS } from './middleware.ts';
import type { AppContext } from './types.ts';

const SITE_PREFIX = /^\/sites\/([a-z_][a-z0-9_]{0,62})(\/.*)$/;

/**
 * The request's host as every decision sees it (the static sites' listener, host routing): the
 * first X-Forwarded-Host behind a trusted proxy, else Host (as Koa reads it); port and IPv6
 * brackets removed, lower-cased.
 */
export function requestHost(req: IncomingMessage, trustProxy: boolean): string {
  const forwarded = trustProxy ? req.headers['x-forwarded-host'] : undefined;
  const raw = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim() || req.headers.host || '';
  const host = raw.startsWith('[') ? raw.slice(1, raw.indexOf(']') < 0 ? undefined : raw.indexOf(']')) : raw.split(':', 1)[0]!;
  return host.toLowerCase();
}

export function hostRouting(config: Config, resolver: HostResolver, gate?: WriteGate) {
  const platformHosts = new Set(config.platformHosts);
  /** The site the request names: its host, or `/sites/{schema}/` on a platform host (`path` then loses the prefix); undefined: the platform. */
  const siteOf = async (ctx: AppContext, host: string): Promise<TenantRef | undefined> => {
    if (platformHosts.has(host)) {
      const m = SITE_PREFIX.exec(ctx.path);
      if (m) {
        const site = await resolver.resolveSchema(m[1]);
        if (!site) throw siteNotFound(m[1]);
        ctx.path = m[2];
        return site;
      }
      if (ctx.path.startsWith('/sites/')) throw siteNotFound(ctx.path.split('/')[2] ?? '');
      return undefined;
    }
    const site = await resolver.resolveHost(host);
    // A frontend worker's host serves static files only (server/http/static-sites.ts answers it first): never the API.
    if (!site || site.worker) throw notFound({ message: `Unknown host "${host}".` });
    return site;
  };
  return async (ctx: AppContext, next: Next) => {
    const host = requestHost(ctx.req, config.trustProxy);
    let site = await siteOf(ctx, host);
    if (!site) return next();
    // A write to a site being moved waits for the move's freeze to end (sites/move-gate.ts), then
    // goes where the site is now: its routing is read again.
    const writes = gate !== undefined && !SAFE_METHODS.has(ctx.method);
    while (writes && gate.holds(site.schema)) {
      await gate.wait(site.schema);
      site = (platformHosts.has(host) ? await resolver.resolveSchema(site.schema) : await resolver.resolveHost(host)) ?? undefined;
      if (!site || site.worker) throw notFound({ message: `Unknown host "${host}".` });
    }
    // Counted as running from the last check on, with no wait between: a freeze that comes later waits for it.
    const leave = writes ? gate.enter(site.schema) : undefined;
    try {
      if (site.cluster !== PRIMARY_CLUSTER) await resolver.siteOrm(site); // its cluster's pool open: the request's unit of work is made there (middleware.ts)
      ctx.state.tenant = site.schema;
      ctx.state.site = site;
      return await next();
    } finally {
      leave?.();
    }
  };
}
