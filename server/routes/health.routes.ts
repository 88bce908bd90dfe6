// Operations probes, outside /api: /healthz (process up), /readyz (database reachable). /readyz
// asks the database on a connection of its own, within DATABASE_READY_TIMEOUT_MS
// (db/availability.ts): a pool whose connections are all taken, or a database that stopped
// answering, never makes it hang.
import Router from '@koa/router';
import type { DatabaseProbe } from '../../shared/db/availability.ts';
import { ROUTER_OPTIONS } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

export function healthRouter(probe: DatabaseProbe, isShuttingDown: () => boolean): Router {
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
    if (await probe.check()) {
      ctx.body = { status: 'ok', database: 'ok' };
      return;
    }
    ctx.status = 503;
    ctx.body = { status: 'error', code: 'SERVICE_UNAVAILABLE', message: 'Database unreachable.', database: 'unreachable' };
  });
  return router;
}
