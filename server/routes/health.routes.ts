// Operations probes, outside /api: /healthz (process up), /readyz (database reachable).
import Router from '@koa/router';
import type { Orm } from '../../shared/db/orm.ts';
import { ROUTER_OPTIONS } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

export function healthRouter(orm: Orm, isShuttingDown: () => boolean): Router {
  const router = new Router(ROUTER_OPTIONS);
  router.get('/healthz', (ctx: AppContext) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx: AppContext) => {
    if (isShuttingDown()) {
      ctx.status = 503;
      ctx.body = { status: 'error', code: 'SERVICE_UNAVAILABLE', message: 'Shutting down.' };
      return;
    }
    try {
      await orm.em.getConnection().execute('SELECT 1');
      ctx.body = { status: 'ok', database: 'ok' };
    } catch {
      ctx.status = 503;
      ctx.body = { status: 'error', code: 'SERVICE_UNAVAILABLE', message: 'Database unreachable.', database: 'unreachable' };
    }
  });
  return router;
}
