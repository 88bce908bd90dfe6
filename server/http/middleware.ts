import type { ChangeAnnouncer } from '../../shared/realtime/announce.ts';
import { randomUUID } from 'node:crypto';
import type { Next } from 'koa';
import cors from '@koa/cors';
import helmet from 'koa-helmet';
import type { Orm } from '../../shared/db/orm.ts';
import { clustersOf } from '../../shared/db/clusters.ts';
import type { Logger } from '../../shared/common/logger.ts';
import { lazyEntityManager, makeContext, WithLazyEm } from '../../shared/context.ts';
import type { UserEvents } from '../../shared/functions/events.service.ts';
import { notAuthenticated } from '../../shared/errors.ts';
import type { Config } from '../../shared/config.ts';
import type { RequestCaches } from '../../shared/common/request-caches.ts';
import type { LongOperations } from '../../shared/db/long-operations.ts';
import { redactPath } from './redact.ts';
import type { RouteStep } from './registry.ts';
import type { AppContext, AppState } from './types.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,100}$/;
/** Methods that change nothing: writes wait for their change to reach the caches; sessions need no CSRF token for them. */
export const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Request id (X-Request-Id in and out), request-scoped EntityManager, the service context (with
 * the longer statement timeout on routes marked `statementTimeout: 'long'`, and the process's
 * long-operation slots), one log line per
 * request; while shutting down, answers close their connection (no keep-alive to wait for).
 */
export function requestContext(
  orm: Orm,
  log: Logger,
  caches: RequestCaches,
  options: { longStatementTimeoutMs: number; isShuttingDown: () => boolean; logRequests: boolean; events?: UserEvents; longOperations: LongOperations; announcer?: ChangeAnnouncer },
) {
  const clusters = clustersOf(orm.em);
  return async (ctx: AppContext, next: Next) => {
    const start = process.hrtime.bigint();
    const incoming = ctx.get('X-Request-Id');
    const requestId = REQUEST_ID.test(incoming) ? incoming : randomUUID();
    ctx.set('X-Request-Id', requestId);
    // On a site of another cluster than the primary, its cluster's pool (opened by host routing).
    const root = () => (ctx.state.site && clusters?.peek(ctx.state.site.cluster)?.em) || orm.em;
    const unit = lazyEntityManager(root);
    // The state's `em` is the unit's, by a getter of its class (shared/context.ts WithLazyEm).
    ctx.state = Object.assign(new WithLazyEm(unit), { requestId, reads: unit.reads, tenant: null }) as unknown as AppState;
    let wrote = false;
    ctx.state.service = () => {
      if (!ctx.state.actor) throw notAuthenticated();
      const service = makeContext(unit, ctx.state.actor, ctx.state.tenant, { ability: ctx.state.ability, caches, events: options.events, longOperations: options.longOperations });
      service.wrote = () => (wrote = true);
      if (ctx.state.route?.statementTimeout === 'long') service.statementTimeoutMs = options.longStatementTimeoutMs;
      return service;
    };
    try {
      await next();
    } finally {
      // A write is answered once its change has reached the caches of every server process: the
      // caller's next request sees it, whichever process serves it. Writes of data (records,
      // edges, storage objects, function invocations) change nothing cached: they answer at once
      // (RouteDef.writes).
      if (!SAFE_METHODS.has(ctx.method) && ctx.state.route?.writes !== 'data') await caches.settled();
      // A write to a table the change log follows committed: the site's change streams are woken (shared/realtime/announce.ts).
      if (wrote && ctx.state.tenant && ctx.status < 400) options.announcer?.changed(root(), ctx.state.tenant);
      if (options.isShuttingDown()) ctx.set('Connection', 'close');
      if (options.logRequests && log.isLevelEnabled('info')) {
        const durationMs = Number(process.hrtime.bigint() - start) / 1e6;
        const actor = ctx.state.actor;
        log.info(
          {
            requestId: ctx.state.requestId,
            method: ctx.method,
            path: redactPath(ctx.path),
            status: ctx.status,
            durationMs: Math.round(durationMs * 100) / 100,
            tenant: ctx.state.tenant,
            user: actor?.kind === 'user' ? actor.uuid : actor?.name,
          },
          'request',
        );
      }
    }
  };
}

export function security(config: Config) {
  const helmetHeaders = helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        scriptSrc: ["'self'"],
        styleSrc: ["'self'", "'unsafe-inline'"],
        imgSrc: ["'self'", 'data:'],
        fontSrc: ["'self'", 'data:'],
        workerSrc: ["'self'", 'blob:'],
        connectSrc: ["'self'"],
        objectSrc: ["'none'"],
        frameAncestors: ["'none'"],
        baseUri: ["'self'"],
      },
    },
    crossOriginEmbedderPolicy: false,
  });
  // The headers depend on nothing of the request: helmet runs once, here, and each response gets
  // the recorded set (helmet per request costs a promise and a dozen middleware calls).
  const recorded: [string, string | number | readonly string[]][] = [];
  const recorder = { setHeader: (name: string, value: string | number | readonly string[]) => void recorded.push([name, value]), removeHeader: () => undefined };
  void helmetHeaders({ req: {}, res: recorder } as never, async () => undefined);
  if (!recorded.length) throw new Error('helmet set no header');
  const headers = async (ctx: AppContext, next: Next) => {
    for (const [name, value] of recorded) ctx.res.setHeader(name, value);
    return next();
  };
  const origins = new Set(config.corsOrigins);
  const corsMiddleware = cors({
    origin: (ctx) => {
      const origin = ctx.get('Origin');
      if (origins.has('*')) return '*';
      return origins.has(origin) ? origin : '';
    },
    allowHeaders: ['Authorization', 'Content-Type', 'X-Request-Id', 'Idempotency-Key'],
    exposeHeaders: ['X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After', 'Idempotent-Replayed'],
    maxAge: 600,
  });
  return [headers, corsMiddleware] as const;
}

/** The methods whose JSON and form bodies are parsed. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * A route step that parses JSON and form bodies, after routing, authentication and limits: the
 * matched route's `bodyLimit` picks the size limit, and unknown or limited requests are not parsed.
 * koa-body (with zod, formidable and co-body: a tenth of a second to load) is loaded by the first
 * body, not with the app: reads and the CLI's commands that send none never pay for it.
 */
export function bodyParser(config: Config): RouteStep {
  let parsers: Promise<{ normal: Parse; data: Parse }> | undefined;
  const load = async () => {
    const { koaBody } = await import('koa-body');
    const parser = (limit: number) =>
      koaBody({
        json: true,
        jsonStrict: true,
        urlencoded: true,
        text: false,
        multipart: false,
        jsonLimit: limit,
        formLimit: limit,
        parsedMethods: [...BODY_METHODS] as never,
      }) as unknown as Parse;
    return { normal: parser(config.bodyLimitBytes), data: parser(config.dataBodyLimitBytes) };
  };
  const done = async () => undefined;
  return async (ctx, def) => {
    if (def.bodyLimit === 'stream' || !BODY_METHODS.has(ctx.method)) return;
    const { normal, data } = await (parsers ??= load());
    await (def.bodyLimit === 'data' ? data : normal)(ctx, done);
  };
}

type Parse = (ctx: AppContext, next: () => Promise<undefined>) => Promise<void>;
