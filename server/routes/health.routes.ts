// Operations probes, outside /api: /healthz (process up), /readyz (database reachable). /readyz
// asks the database on a connection of its own, within DATABASE_READY_TIMEOUT_MS
// (db/availability.ts): a pool whose connections are all taken, or a database that stopped
// answering, never makes it hang. Each other cluster this process serves sites of (db/clusters.ts)
// is asked the same way and reported under `clusters`; only the primary decides readiness (a
// cluster down makes its own sites answer 503, not the others').
import Router from '@koa/router';
import { DatabaseProbe } from '../../shared/db/availability.ts';
import { PRIMARY_CLUSTER, type Clusters } from '../../shared/db/clusters.ts';
import { ROUTER_OPTIONS } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

export function healthRouter(probe: DatabaseProbe, isShuttingDown: () => boolean, clusters?: Clusters, timeoutMs = 1500): Router {
  const router = new Router(ROUTER_OPTIONS);
  const probes = new Map<string, DatabaseProbe>();
  const clusterStates = async (primary: boolean): Promise<Record<string, 'ok' | 'unreachable'>> => {
    const open = clusters?.opened().filter((c) => c.directUrl) ?? [];
    const states = await Promise.all(
      open.map(async (c) => {
        const key = `${c.name} ${c.directUrl}`;
        if (!probes.has(key)) probes.set(key, new DatabaseProbe(c.directUrl, timeoutMs));
        return [c.name, (await probes.get(key)!.check()) ? 'ok' : 'unreachable'] as const;
      }),
    );
    return Object.fromEntries([[PRIMARY_CLUSTER, primary ? 'ok' : 'unreachable'], ...states]);
  };
  router.get('/healthz', (ctx: AppContext) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx: AppContext) => {
    if (isShuttingDown()) {
      ctx.status = 503;
      ctx.body = { status: 'error', code: 'SERVICE_UNAVAILABLE', message: 'Shutting down.' };
      return;
    }
    const ok = await probe.check();
    const states = await clusterStates(ok);
    if (ok) {
      ctx.body = { status: 'ok', database: 'ok', clusters: states };
      return;
    }
    ctx.status = 503;
    ctx.body = { status: 'error', code: 'SERVICE_UNAVAILABLE', message: 'Database unreachable.', database: 'unreachable', clusters: states };
  });
  return router;
}
