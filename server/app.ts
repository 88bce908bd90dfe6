// Builds the Koa application without listening (tests and `serve` both use it).
import Koa from 'koa';
import type { Redis } from 'ioredis';
import type { TokenSettings } from '../shared/auth/tokens.ts';
import type { Logger } from '../shared/common/logger.ts';
import type { Config } from '../shared/config.ts';
import type { Orm } from '../shared/db/orm.ts';
import { UserView } from '../shared/users/user.schemas.ts';
import { bearerAuthentication } from './http/auth.ts';
import { ErrorBody, MessageBody } from './http/envelopes.ts';
import { errorMiddleware } from './http/errors.ts';
import { hostRouting } from './http/tenancy.ts';
import type { HostResolver } from '../shared/tenancy/host-resolver.ts';
import { bodyParser, requestContext, security } from './http/middleware.ts';
import { RateLimits } from './http/rate-limit.ts';
import { RouteRegistry, type RouteDef } from './http/registry.ts';
import type { AppState } from './http/types.ts';
import { authRoutes } from './routes/auth.routes.ts';
import { docsRouter } from './routes/docs.routes.ts';
import { healthRouter } from './routes/health.routes.ts';
import { userRoutes } from './routes/users.routes.ts';

export interface AppDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  tokens: TokenSettings;
  redis?: Redis;
  isShuttingDown?: () => boolean;
  /** Further routes (tests mount failure probes this way). */
  extraRoutes?: RouteDef[];
  /** Host → site resolution; without it every host serves the platform API. */
  hosts?: HostResolver;
}

export const API_VERSION = '1.0.0';

export function buildRegistry(deps: Pick<AppDeps, 'config' | 'tokens'>): RouteRegistry {
  return new RouteRegistry().add(...authRoutes(deps.tokens), ...userRoutes(deps.config.publicUrl));
}

export function openapiDocument(registry: RouteRegistry): Record<string, unknown> {
  return registry.openapi(
    {
      title: 'Platform API',
      version: API_VERSION,
      description: 'Multi-tenant application platform. Authenticate with `POST /api/auth/jwt/token/` and send `Authorization: Bearer <access>`.',
    },
    { User: UserView, Error: ErrorBody, Message: MessageBody },
  );
}

export function createApp(deps: AppDeps): Koa<AppState> {
  const app = new Koa<AppState>({ proxy: deps.config.trustProxy });
  app.silent = true; // errors are logged by errorMiddleware, with the request id
  const registry = buildRegistry(deps).add(...(deps.extraRoutes ?? []));
  const steps = [bearerAuthentication(deps.tokens)];
  if (deps.config.rateLimit.enabled) steps.push(new RateLimits(deps.config.rateLimit, deps.redis).step());
  const api = registry.router(steps);
  const health = healthRouter(deps.orm, deps.isShuttingDown ?? (() => false));
  const docs = docsRouter(() => openapiDocument(registry));

  app.use(requestContext(deps.orm, deps.log));
  app.use(errorMiddleware(deps.log));
  for (const m of security(deps.config)) app.use(m);
  app.use(health.routes());
  app.use(docs.routes());
  if (deps.hosts) app.use(hostRouting(deps.config, deps.hosts));
  app.use(bodyParser(deps.config));
  app.use(api.routes());
  app.use(api.allowedMethods());
  return app;
}
