// Host routing: the request's host (port ignored) selects the platform API (PLATFORM_HOSTS)
// or a site (its active domains). On a platform host, `/sites/{schema_name}/api/...` reaches
// that site's API too. Unknown hosts get 404 in the standard envelope.
import type { Next } from 'koa';
import type { Config } from '../../shared/config.ts';
import { notFound, siteNotFound } from '../../shared/errors.ts';
import type { HostResolver } from '../../shared/tenancy/host-resolver.ts';
import type { AppContext } from './types.ts';

const SITE_PREFIX = /^\/sites\/([a-z_][a-z0-9_]{0,62})(\/.*)$/;

export function hostRouting(config: Config, resolver: HostResolver) {
  const platformHosts = new Set(config.platformHosts);
  return async (ctx: AppContext, next: Next) => {
    const host = ctx.hostname.toLowerCase().replace(/^\[|\]$/g, '');
    if (platformHosts.has(host)) {
      const m = SITE_PREFIX.exec(ctx.path);
      if (m) {
        const site = await resolver.resolveSchema(m[1]);
        if (!site) throw siteNotFound(m[1]);
        ctx.state.tenant = site.schema;
        ctx.state.site = site;
        ctx.path = m[2];
      } else if (ctx.path.startsWith('/sites/')) {
        throw siteNotFound(ctx.path.split('/')[2] ?? '');
      }
      return next();
    }
    const site = await resolver.resolveHost(host);
    if (!site) throw notFound({ message: `Unknown host "${host}".` });
    ctx.state.tenant = site.schema;
    ctx.state.site = site;
    return next();
  };
}
