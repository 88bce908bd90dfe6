// Host routing: the request's host (port ignored) selects the platform API (PLATFORM_HOSTS)
// or a site (its active domains). On a platform host, `/sites/{schema_name}/api/...` reaches
// that site's API too. Unknown hosts get 404 in the standard envelope.
import type { IncomingMessage } from 'node:http';
import type { Next } from 'koa';
import type { Config } from '../../shared/config.ts';
import { notFound, siteNotFound } from '../../shared/errors.ts';
import { PRIMARY_CLUSTER } from '../../shared/db/clusters.ts';
import type { HostResolver } from '../../shared/tenancy/host-resolver.ts';
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

export function hostRouting(config: Config, resolver: HostResolver) {
  const platformHosts = new Set(config.platformHosts);
  return async (ctx: AppContext, next: Next) => {
    const host = requestHost(ctx.req, config.trustProxy);
    if (platformHosts.has(host)) {
      const m = SITE_PREFIX.exec(ctx.path);
      if (m) {
        const site = await resolver.resolveSchema(m[1]);
        if (!site) throw siteNotFound(m[1]);
        if (site.cluster !== PRIMARY_CLUSTER) await resolver.siteOrm(site); // its cluster's pool open: the request's unit of work is made there (middleware.ts)
        ctx.state.tenant = site.schema;
        ctx.state.site = site;
        ctx.path = m[2];
      } else if (ctx.path.startsWith('/sites/')) {
        throw siteNotFound(ctx.path.split('/')[2] ?? '');
      }
      return next();
    }
    const site = await resolver.resolveHost(host);
    // A frontend worker's host serves static files only (server/http/static-sites.ts answers it first): never the API.
    if (!site || site.worker) throw notFound({ message: `Unknown host "${host}".` });
    if (site.cluster !== PRIMARY_CLUSTER) await resolver.siteOrm(site);
    ctx.state.tenant = site.schema;
    ctx.state.site = site;
    return next();
  };
}
