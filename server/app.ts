// Builds the Koa application without listening (tests and `serve` both use it).
import type { RecordFeed } from '../shared/realtime/feed.ts';
import type { ChangeAnnouncer } from '../shared/realtime/announce.ts';
import { realtimeRoutes } from './routes/realtime.routes.ts';
import Koa from 'koa';
import type { Redis } from 'ioredis';
import type { TokenSettings } from '../shared/auth/tokens.ts';
import type { Logger } from '../shared/common/logger.ts';
import type { Config } from '../shared/config.ts';
import type { Orm } from '../shared/db/orm.ts';
import { clustersOf } from '../shared/db/clusters.ts';
import type { WriteGate } from '../shared/sites/move-gate.ts';
import { UserView } from '../shared/users/user.schemas.ts';
import { OrganizationView, Privileges } from '../shared/organizations/organization.schemas.ts';
import { MemberView } from '../shared/organizations/member.schemas.ts';
import { GroupView } from '../shared/permissions/group.schemas.ts';
import { PermissionView } from '../shared/permissions/permission.schemas.ts';
import { authentication } from './http/auth.ts';
import { ErrorBody, MessageBody } from './http/envelopes.ts';
import { errorMiddleware, type FaultLogs } from './http/errors.ts';
import { DatabaseProbe, FaultLog } from '../shared/db/availability.ts';
import { LongOperations } from '../shared/db/long-operations.ts';
import { hostRouting } from './http/tenancy.ts';
import type { HostResolver } from '../shared/tenancy/host-resolver.ts';
import { AppRateLimits } from '../shared/apps/app-limits.ts';
import { requestCaches, type RequestCaches } from '../shared/common/request-caches.ts';
import { bodyParser, requestContext, security } from './http/middleware.ts';
import { RouteRegistry, type RouteDef, type RouteStep } from './http/registry.ts';
import type { AppState } from './http/types.ts';
import { authRoutes } from './routes/auth.routes.ts';
import { docsRouter } from './routes/docs.routes.ts';
import { healthRouter } from './routes/health.routes.ts';
import { userRoutes } from './routes/users.routes.ts';
import { tenantUserRoutes } from './routes/tenant-users.routes.ts';
import { secretRoutes } from './routes/secrets.routes.ts';
import { socialRoutes } from './routes/social.routes.ts';
import { dataTableRoutes } from './routes/datatables.routes.ts';
import { migrationRoutes } from './routes/migrations.routes.ts';
import { recordRoutes } from './routes/records.routes.ts';
import { edgeRoutes } from './routes/edges.routes.ts';
import { SecretKeyring } from '../shared/secrets/crypto.ts';
import { SecretHistoryItem, SecretListItem, SecretView } from '../shared/secrets/secret.schemas.ts';
import { SecretTypeView } from '../shared/secrets/secret-type.schemas.ts';
import { PublicProfile, SiteUserView } from '../shared/tenancy/tenant-users.schemas.ts';
import { invitationRoutes } from './routes/invitations.routes.ts';
import { createMailer, type Mailer } from '../shared/mail/mailer.ts';
import { siteRoutes } from './routes/sites.routes.ts';
import { domainRoutes } from './routes/domains.routes.ts';
import { organizationRoutes } from './routes/organizations.routes.ts';
import { memberRoutes } from './routes/members.routes.ts';
import { groupRoutes } from './routes/groups.routes.ts';
import { appRoutes } from './routes/apps.routes.ts';
import { dataSourceRoutes } from './routes/datasources.routes.ts';
import { policyRoutes } from './routes/policies.routes.ts';
import { appRoleRoutes } from './routes/app-roles.routes.ts';
import { storageRoutes } from './routes/storage.routes.ts';
import type { ObjectStore } from '../shared/storage/objstore/types.ts';
import { BucketView } from '../shared/storage/bucket.schemas.ts';
import { functionRoutes } from './routes/functions.routes.ts';
import { FunctionRuntime } from '../shared/functions/runtime.ts';
import { OutboundGuard } from '../shared/net/outbound.ts';
import { FunctionView, InvocationView } from '../shared/functions/function.schemas.ts';
import { frontendWorkerRoutes } from './routes/frontend-workers.routes.ts';
import { importRoutes, packageRoutes } from './routes/packages.routes.ts';
import { BuildView, WorkerView } from '../shared/workers/worker.schemas.ts';

export interface AppDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  tokens: TokenSettings;
  redis?: Redis;
  isShuttingDown?: () => boolean;
  /** One log line per request (default); the CLI's direct mode has none (its requests are the command's). */
  logRequests?: boolean;
  /** Further routes (tests mount failure probes this way). */
  extraRoutes?: RouteDef[];
  /** Host → site resolution; without it every host serves the platform API. */
  hosts?: HostResolver;
  /** The write freeze of site moves (sites/move-gate.ts). */
  gate?: WriteGate;
  /** Apps' rate limits (cached settings); without it, a cache of its own that only its TTL refreshes. */
  appLimits?: AppRateLimits;
  /** The keys of secret values; without it, derived from tokens.secretKey at SECRETS_KEY_VERSION. */
  secrets?: SecretKeyring;
  /** Outgoing mail (invitations); without it, one is made from the config (SMTP_URL or the outbox). */
  mailer?: Mailer;
  /** The process's caches of users and table definitions; without it, nothing is cached. */
  caches?: RequestCaches;
  /** Where storage objects' bytes live (storeFromConfig: a filesystem directory or S3). */
  store: ObjectStore;
  /** Where functions run (sandboxes, the job queue); without it, one of its own that claims no queued work (the CLI's direct mode). */
  functions?: FunctionRuntime;
  /** The process's change streams (shared/realtime/feed.ts); without it, the changes route answers 503 (the CLI's direct mode). */
  feed?: RecordFeed;
  /** Wakes change streams after data writes (shared/realtime/announce.ts); without it (the CLI's direct mode) the servers' readers find the writes by their look every second. */
  announcer?: ChangeAnnouncer;
  /** /readyz's check on a connection of its own; without it, one made here (connecting only when /readyz is asked). */
  probe?: DatabaseProbe;
  /** How faults are logged (one line per burst); without them, logs whose bursts end after a quiet second (no probe). */
  faults?: FaultLogs;
}

/** The fault logs of a server: the database's burst ends when `probe` answers again; a full disk's after 30 s without one. */
export function faultLogs(log: Logger, probe?: DatabaseProbe): FaultLogs {
  return {
    database: new FaultLog(log, { started: 'database unavailable: requests answer 503', ended: 'database available again', recovered: probe && (() => probe.check()) }),
    storage: new FaultLog(log, { started: 'storage full: writes answer 507', ended: 'no storage-full failure for 30 s', intervalMs: 30_000 }),
  };
}

export const API_VERSION = '1.0.0';

/** The function runtime of an app made without one: sandboxes on demand, no queue claims (its `start` is never called). */
export function functionRuntime(deps: Pick<AppDeps, 'config' | 'orm' | 'tokens' | 'log' | 'faults'>, keyring: SecretKeyring): FunctionRuntime {
  return new FunctionRuntime({ orm: deps.orm, keyring, tokens: deps.tokens, config: deps.config.functions, log: deps.log, platformHost: deps.config.platformHosts[0] ?? 'localhost', databaseFaults: deps.faults?.database });
}

export function buildRegistry(deps: Pick<AppDeps, 'config' | 'tokens' | 'mailer' | 'log' | 'store' | 'feed'> & { secrets: SecretKeyring; functions: FunctionRuntime }): RouteRegistry {
  const mailer = deps.mailer ?? createMailer(deps.config);
  const { secrets: keyring, functions: runtime } = deps;
  return new RouteRegistry().add(...authRoutes(deps.tokens, deps.log), ...userRoutes(deps.config, mailer))
    .add(...invitationRoutes(deps.config, mailer))
    .add(...siteRoutes(deps.config), ...domainRoutes(deps.config))
    .add(...organizationRoutes(deps.config), ...memberRoutes(deps.config.publicUrl), ...groupRoutes(deps.config.publicUrl))
    .add(...tenantUserRoutes(deps.config.publicUrl))
    .add(...secretRoutes(keyring, deps.config.publicUrl), ...socialRoutes(keyring, deps.tokens, deps.config.socialAllowHttp, runtime.events, new OutboundGuard(deps.config.outbound)))
    .add(...dataTableRoutes(deps.config.publicUrl), ...migrationRoutes(deps.config.publicUrl), ...realtimeRoutes(deps.feed), ...recordRoutes({ maxDepth: deps.config.graphMaxDepth }), ...edgeRoutes())
    .add(...importRoutes({ config: deps.config, store: deps.store, keyring }))
    .add(...appRoutes(deps.config), ...dataSourceRoutes())
    .add(...policyRoutes())
    .add(...appRoleRoutes(deps.config.publicUrl))
    .add(...storageRoutes({ store: deps.store, publicUrl: deps.config.publicUrl, doclibEnabled: deps.config.doclibEnabled }))
    .add(...functionRoutes({ runtime, publicUrl: deps.config.publicUrl }))
    .add(...frontendWorkerRoutes({ config: deps.config, store: deps.store }))
    .add(...packageRoutes({ config: deps.config, store: deps.store }));
}

export function openapiDocument(registry: RouteRegistry): Record<string, unknown> {
  return registry.openapi(
    {
      title: 'Platform API',
      version: API_VERSION,
      description: 'Multi-tenant application platform. Authenticate with `POST /api/auth/jwt/token/` and send `Authorization: Bearer <access>`.',
    },
    { User: UserView, Error: ErrorBody, Message: MessageBody, Organization: OrganizationView, Member: MemberView, Privileges, Group: GroupView, Permission: PermissionView,
      SiteUser: SiteUserView, PublicProfile, SecretType: SecretTypeView, Secret: SecretView, SecretListItem, SecretHistoryItem, Bucket: BucketView,
      Function: FunctionView, FunctionInvocation: InvocationView, FrontendWorker: WorkerView, FrontendWorkerBuild: BuildView },
  );
}

/**
 * A route step made by the first request that reaches it: its module (and its libraries) is not
 * loaded with the app, so the CLI's direct mode, whose app has no rate limits, never loads them.
 */
function loadedStep(make: () => Promise<RouteStep>): RouteStep {
  let step: Promise<RouteStep> | undefined;
  return async (ctx, def) => (await (step ??= make()))(ctx, def);
}

export function createApp(deps: AppDeps): Koa<AppState> {
  // Behind N trusted proxies the client address is the Nth X-Forwarded-For entry from the right:
  // the entries left of it were written by the client and are not trusted (Koa: maxIpsCount).
  const app = new Koa<AppState>({ proxy: deps.config.trustProxy, maxIpsCount: deps.config.trustProxyHops });
  app.silent = true; // errors are logged by errorMiddleware, with the request id
  const secrets = deps.secrets ?? new SecretKeyring(deps.tokens.secretKey, deps.config.secretsKeyVersion);
  const functions = deps.functions ?? functionRuntime(deps, secrets);
  const registry = buildRegistry({ ...deps, secrets, functions }).add(...(deps.extraRoutes ?? []));
  const caches = deps.caches ?? requestCaches();
  const steps = [authentication(deps.tokens, caches.users)];
  if (deps.config.rateLimit.enabled) {
    const appLimits = deps.appLimits ?? new AppRateLimits(deps.orm);
    steps.push(loadedStep(async () => new (await import('./http/rate-limit.ts')).RateLimits(deps.config.rateLimit, deps.redis, appLimits, deps.config.redis).step()));
  }
  const api = registry.router([...steps, bodyParser(deps.config)]);
  const isShuttingDown = deps.isShuttingDown ?? (() => false);
  const health = healthRouter(deps.probe ?? new DatabaseProbe(deps.orm.config.get('clientUrl')!, deps.config.db.readyTimeoutMs), isShuttingDown, clustersOf(deps.orm.em), deps.config.db.readyTimeoutMs);
  const docs = docsRouter(() => openapiDocument(registry));

  const longOperations = new LongOperations(deps.config.longOperations);
  app.use(requestContext(deps.orm, deps.log, caches, { longStatementTimeoutMs: deps.config.longStatementTimeoutMs, isShuttingDown, logRequests: deps.logRequests ?? true, events: functions.events, longOperations, announcer: deps.announcer }));
  app.use(errorMiddleware(deps.log, deps.faults ?? faultLogs(deps.log)));
  for (const m of security(deps.config)) app.use(m);
  app.use(health.routes());
  app.use(health.allowedMethods());
  app.use(docs.routes());
  app.use(docs.allowedMethods());
  if (deps.hosts) app.use(hostRouting(deps.config, deps.hosts, deps.gate));
  app.use(api);
  return app;
}
