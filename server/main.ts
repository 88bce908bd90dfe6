// Starts the platform: the port first (taken: PortInUseError, before anything else is made), then
// database (embedded or DATABASE_URL), migrations, first superuser; requests are answered 503
// (starting) until the HTTP application is ready. `close()` shuts down in order: stop accepting → finish in-flight requests
// (up to SHUTDOWN_TIMEOUT_MS; then what they run in the database is cut off and rolled back, and
// their connections closed) → close Redis and the pool → stop the embedded PostgreSQL.
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { UPGRADE, type UpgradeRequest } from './routes/realtime.routes.ts';
import { RecordFeed } from '../shared/realtime/feed.ts';
import { ChangeAnnouncer } from '../shared/realtime/announce.ts';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import { AppRateLimits } from '../shared/apps/app-limits.ts';
import { systemActor } from '../shared/auth/actor.ts';
import { pruneExpired } from '../shared/auth/sessions.ts';
import { tokenSettings } from '../shared/auth/tokens.ts';
import { createLogger, type Logger } from '../shared/common/logger.ts';
import type { Config } from '../shared/config.ts';
import { makeContext } from '../shared/context.ts';
import { DatabaseProbe, FaultLog } from '../shared/db/availability.ts';
import { openDatabase, type Database } from '../shared/db/database.ts';
import { DomainError } from '../shared/errors.ts';
import { migratePlatform } from '../shared/db/orm.ts';
import { scheduleClusterWide } from '../shared/db/scheduled-jobs.ts';
import { pooledSessionDifferences, pooledSettings } from '../shared/db/pooler.ts';
import { recordPublicUrl } from '../shared/db/platform-settings.ts';
import { ChangeListener } from '../shared/db/changes.ts';
import { forEachCluster } from '../shared/db/clusters.ts';
import { notifyOn, WriteGate } from '../shared/sites/move-gate.ts';
import { requestCaches, type RequestCaches } from '../shared/common/request-caches.ts';
import { HostResolver } from '../shared/tenancy/host-resolver.ts';
import { migrateAllTenants } from '../shared/tenancy/migrations.ts';
import { bootstrapAdmin } from '../shared/users/user.service.ts';
import { createMailer } from '../shared/mail/mailer.ts';
import { SecretKeyring } from '../shared/secrets/crypto.ts';
import { refreshUsage, storageSites } from '../shared/storage/bucket.service.ts';
import { sweepBlobs } from '../shared/storage/blobs.ts';
import { collectWorkerBlobs, failInterruptedBuilds, sweepWorkerBlobs } from '../shared/workers/deploy.ts';
import { sweepPackages } from '../shared/packages/export.service.ts';
import { staticSites } from './http/static-sites.ts';
import { storeFromConfig } from '../shared/storage/objstore/index.ts';
import type { ObjectStore } from '../shared/storage/objstore/types.ts';
import { createApp, faultLogs, functionRuntime } from './app.ts';
import type { FunctionRuntime } from '../shared/functions/runtime.ts';
import { tuneHeap } from './node-flags.ts';
import type { RouteDef } from './http/registry.ts';

export interface ServerHandle {
  url: string;
  port: number;
  db: Database;
  log: Logger;
  hosts: HostResolver;
  /** The process's change streams. */
  feed: RecordFeed;
  close(): Promise<void>;
}

export interface StartOptions {
  migrate?: boolean;
  log?: Logger;
  /** Where the one-time generated admin password is shown (default: stderr). */
  announce?: (text: string) => void;
  extraRoutes?: RouteDef[];
}

/** The token blacklists of the platform and its sites, the browser sessions and the idempotency keys: expired rows go; record changes past their retention too. */
const pruneJob = (db: Database, config: Config) => async () => {
  const pruned = await pruneExpired(db.orm.em.fork(), config.realtime);
  return pruned.deleted || pruned.sessions || pruned.idempotencyKeys || pruned.changes ? pruned : undefined;
};

/** Storage upkeep of every site: usage counters and quota state (`check_storage_quotas`), then blobs no record holds (shared/storage/, shared/workers/). */
const storageJob = (db: Database, store: ObjectStore, tmpDir: string) => async () => {
  let buckets = 0;
  let swept = 0;
  let siteCount = 0;
  // Each cluster's sites on that cluster (db/clusters.ts).
  await forEachCluster(db.orm.em.fork(), async (em) => {
    const sites = await storageSites(em);
    siteCount += sites.length;
    const versions = new Map((await em.execute('SELECT schema_name, version FROM public.tenant_schemas')).map((r) => [String(r.schema_name), Number(r.version)]));
    for (const schema of sites) {
      buckets += (await refreshUsage(em, schema)).buckets;
      swept += await sweepBlobs(em, store, schema);
      // Frontend workers' blobs: those a crash left half-stored, and those no build names any more (shared/workers/deploy.ts).
      if ((versions.get(schema) ?? 0) >= 13) {
        await failInterruptedBuilds(em, schema);
        swept += (await sweepWorkerBlobs(em, store.site(schema), schema)) + (await collectWorkerBlobs(em, store.site(schema), schema));
      }
      // App packages: interrupted exports, their spool files and stored packages no job names (shared/packages/).
      if ((versions.get(schema) ?? 0) >= 14) swept += (await sweepPackages(em, store.site(schema), schema, tmpDir)).removed;
    }
  });
  return buckets || swept ? { sites: siteCount, buckets, swept } : undefined;
};

/**
 * Platform migrations, then every site schema's (a site schema that fails is logged: `platform
 * migrate` resumes it), on the direct connection; behind a transaction pooler, the session
 * settings of its connections too (db/pooler.ts).
 */
async function migrate(db: Database, config: Config, log: Logger): Promise<void> {
  await db.direct(async (orm, url) => {
    const report = await migratePlatform(orm, url, db.proxied ? pooledSettings(config) : undefined);
    if (report.applied.length) log.info({ applied: report.applied }, 'platform migrations applied');
    const tenants = await migrateAllTenants(orm.em.fork(), (done, total, r) => log.info({ done, total, ...r }, 'site schema migrated'));
    if (tenants.failed.length) log.error({ failed: tenants.failed }, 'site schemas failed to migrate; run `platform migrate`');
  });
}

/**
 * Behind a transaction pooler: the connections it gives have the session settings, or the server
 * does not serve (intervals in another style would be wrong data); other timeouts than this
 * process's configuration are logged (connections the proxy opened before they were set keep
 * theirs until it closes them).
 */
async function checkPooledSessions(db: Database, config: Config, log: Logger): Promise<void> {
  const differences = await pooledSessionDifferences(db.orm.em.fork(), pooledSettings(config));
  const style = differences.find((d) => d.name === 'intervalstyle');
  if (style) {
    throw new Error(
      `connections through DATABASE_URL have intervalstyle ${style.found}, not ${style.expected}: the proxy must log in as the role of DATABASE_DIRECT_URL, whose defaults the migrations set (run \`platform migrate\`), and close its older server connections (PgBouncer: RECONNECT); see docs/operations.md "Behind PgBouncer"`,
    );
  }
  if (differences.length) log.warn({ differences }, 'connections through DATABASE_URL have other timeouts than this process\'s configuration');
}

/** The first superuser, when there is none yet; a generated password is shown once, on the terminal only. */
async function bootstrap(db: Database, config: Config, log: Logger, announce: (text: string) => void): Promise<void> {
  const boot = await bootstrapAdmin(makeContext(db.orm.em.fork(), systemActor('bootstrap')), config.admin);
  if (!boot.created) return;
  log.info({ username: boot.username }, 'first superuser created');
  if (boot.generatedPassword) {
    // Shown once, on the terminal only: never through the structured log.
    announce(
      `\n  First superuser created.\n    username: ${boot.username}\n    password: ${boot.generatedPassword}\n  Store it now: it is not shown again. Lost, set another on this machine:\n    platform user update ${boot.username} --password … --direct\n\n`,
    );
  }
}

/**
 * Redis for the shared rate-limit counters (REDIS_URL); unreachable at start, the limits count in
 * process memory. A command unanswered within REDIS_COMMAND_TIMEOUT_MS fails (a frozen Redis keeps
 * its socket open and answers nothing), and so does a connection not made within
 * REDIS_CONNECT_TIMEOUT_MS: the rate limits then count in process memory (http/rate-limit.ts).
 */
async function connectRedis(config: Config, log: Logger): Promise<{ redis: Redis; faults: FaultLog }> {
  const { commandTimeoutMs, connectTimeoutMs } = config.redis;
  const redis = new Redis(config.redisUrl!, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true, commandTimeout: commandTimeoutMs, connectTimeout: connectTimeoutMs });
  // Its errors (one per reconnection attempt while it is down) are logged once per burst.
  const faults = new FaultLog(log, { started: 'redis unreachable: rate limits count in process memory', ended: 'redis reachable again', recovered: async () => redis.status === 'ready' });
  redis.on('error', (err) => faults.failed(err));
  await redis.connect().catch((err) => faults.failed(err));
  return { redis, faults };
}

/** The per-process caches (host → site, app rate limits, users, tables) and the listener that drops their entries when a change commits. */
function processCaches(db: Database, config: Config): { hosts: HostResolver; appLimits: AppRateLimits; caches: RequestCaches; changes: ChangeListener } {
  // Every cache serves only while the listener listens (common/cached-lookup.ts).
  const changes = new ChangeListener({ connectTimeoutMs: config.db.acquireTimeoutMs });
  const hosts = new HostResolver(db.orm, { listener: changes, environment: config.environment });
  const appLimits = new AppRateLimits(db.orm, { listener: changes });
  changes.on('routing', () => hosts.invalidate()).on('app-settings', (schema) => appLimits.invalidate(schema));
  return { hosts, appLimits, caches: requestCaches(changes), changes };
}

/** The port is taken: said before anything else is done (no database made, no password shown and lost). */
export class PortInUseError extends Error {
  override name = 'PortInUseError';
}

/** Listens on HOST:PORT; the URL to reach it (0.0.0.0 is reached at 127.0.0.1). */
async function listen(srv: http.Server, config: Config): Promise<{ url: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    srv.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new PortInUseError(`port ${config.port} is in use: set PORT=… (or \`platform serve --port …\`) to a free port, or stop what listens on it`) : err),
    );
    srv.listen(config.port, config.host, () => resolve());
  });
  const { port } = srv.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  return { url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`, port };
}

/**
 * Stops accepting and waits for the requests in flight: at most `timeoutMs`. Then what they run
 * in the database is cut off first (their statements stop, their transactions roll back, nothing
 * of theirs can commit any more: driver.ts cutOff), and their connections are closed.
 */
function stopAccepting(srv: http.Server, db: Database, timeoutMs: number, log: Logger): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      const cut = db.cutOff();
      srv.closeAllConnections();
      void cut.then((connections) => log.warn({ connections }, 'shutdown timeout: requests in flight cut off, their database work rolled back'));
    }, timeoutMs);
    // close() stops accepting and closes the connections idle now; a keep-alive
    // connection whose request is still running turns idle later (answers sent during
    // shutdown say `Connection: close`; a stream already under way could not): sweep.
    const sweep = setInterval(() => srv.closeIdleConnections(), 50);
    srv.close(() => {
      clearTimeout(timer);
      clearInterval(sweep);
      resolve();
    });
  });
}

/** What a request gets while the server starts (migrations, first-run work): 503, try again in a second. */
function starting(res: http.ServerResponse): void {
  const body = new DomainError('SERVICE_UNAVAILABLE', 'The platform is starting; retry in a moment.', { detail: 'Service temporarily unavailable.', extra: { retry_after: 1 } }).toBody();
  res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', connection: 'close' });
  res.end(JSON.stringify(body));
}

export async function startServer(config: Config, options: StartOptions = {}): Promise<ServerHandle> {
  tuneHeap();
  const log = options.log ?? createLogger(config.logLevel);
  // The port first: a taken one is said before any first-run work (a database made, a password
  // shown once). Until the platform is ready, requests are answered 503 (starting).
  let handler: http.RequestListener | undefined;
  const srv = http.createServer((req, res) => (handler ? handler(req, res) : starting(res)));
  srv.keepAliveTimeout = 65_000;
  const { url, port } = await listen(srv, config);
  const db = await openDatabase(config, { info: (m) => log.info(m), error: (m) => log.error(m) }).catch((err: unknown) => {
    srv.close();
    throw err;
  });
  let redis: Redis | undefined;
  let redisFaults: FaultLog | undefined;
  let changes: ChangeListener | undefined;
  let store: ObjectStore | undefined;
  let functions: FunctionRuntime | undefined;
  try {
    if (options.migrate !== false) await migrate(db, config, log);
    if (db.proxied) await checkPooledSessions(db, config, log);
    await recordPublicUrl(db.orm.em.fork(), config.publicUrl).catch((err: unknown) => log.warn({ err }, 'the public URL was not recorded for the CLI\'s direct mode'));
    const tokens = tokenSettings(config);
    await bootstrap(db, config, log, options.announce ?? ((t: string) => process.stderr.write(t)));
    if (config.redisUrl) ({ redis, faults: redisFaults } = await connectRedis(config, log));
    const { hosts, appLimits, caches, changes: listener } = processCaches(db, config);
    changes = listener;
    const probe = new DatabaseProbe(db.url, config.db.readyTimeoutMs);
    const faults = faultLogs(log, probe);
    const listening = new FaultLog(log, { started: 'change listener disconnected: caches bypassed until it listens again', ended: 'change listener listening again', recovered: async () => listener.listening });
    if (!config.redisUrl) {
      // Without Redis each process counts rate limits in its own memory: N processes admit N times the limit.
      let warned = false;
      changes.onPeer(() => {
        if (warned) return;
        warned = true;
        log.warn('another server process shares this database but REDIS_URL is unset: rate limits are counted per process; set REDIS_URL on every process');
      });
    }
    await changes.listen(db.directUrl, (err) => listening.failed(err)); // LISTEN needs a session: never through a transaction pooler
    // Each other cluster whose sites this process serves: its sites' triggers notify there (db/clusters.ts).
    db.clusters.follow(listener);
    db.clusters.onOpen((_name, directUrl) => listener.listenAlso(directUrl, (err) => listening.failed(err)));
    const gate = new WriteGate(listener.id, notifyOn(db.orm.em)).follow(listener);
    let shuttingDown = false;
    const mailer = createMailer(config, log);
    const secrets = new SecretKeyring(tokens.secretKey, config.secretsKeyVersion);
    const objects = await storeFromConfig(config.storage, config.dataDir);
    store = objects;
    functions = functionRuntime({ config, orm: db.orm, tokens, log, faults }, secrets);
    const feed = new RecordFeed(config.realtime, changes, log);
    const announcer = new ChangeAnnouncer((schema) => feed.wake(schema), log);
    const app = createApp({ config, orm: db.orm, log, tokens, redis, hosts, gate, appLimits, caches, mailer, secrets, store: objects, functions, feed, announcer, probe, faults, isShuttingDown: () => shuttingDown, extraRoutes: options.extraRoutes });
    // Frontend workers' hosts first (static files only, outside the API's middleware, routes and limits), then the API.
    const api = app.callback();
    const sites = staticSites({ hosts, store: objects, platformHosts: config.platformHosts, trustProxy: config.trustProxy, log });
    handler = (req, res) => sites(req, res, api);
    // A WebSocket upgrade (the realtime socket) goes through the API's pipeline like any request
    // (host routing, authentication, limits); its route takes the socket over, or the answer
    // (401, 404, 426…) is written on the socket as an HTTP response.
    srv.on('upgrade', (req: UpgradeRequest, socket: Duplex, head: Buffer) => {
      req[UPGRADE] = { socket, head };
      const res = new http.ServerResponse(req);
      res.assignSocket(socket as Socket);
      res.shouldKeepAlive = false;
      res.on('finish', () => (socket as Socket).destroySoon());
      void api(req, res);
    });
    log.info({ url, database: db.embedded ? 'embedded' : 'external', environment: config.environment }, 'platform listening');
    functions.start(changes, url);
    // Once per interval across every server process on the database (db/scheduled-jobs.ts).
    const timers = { em: () => db.orm.em.fork(), log, owner: functions.owner };
    const jobs = [
      config.blacklistPruneIntervalMs ? scheduleClusterWide(timers, 'token blacklist pruning', config.blacklistPruneIntervalMs, pruneJob(db, config)) : undefined,
      config.storageMaintenanceIntervalMs ? scheduleClusterWide(timers, 'storage maintenance', config.storageMaintenanceIntervalMs, storageJob(db, objects, path.join(config.dataDir, 'tmp'))) : undefined,
    ];
    let closing: Promise<void> | undefined;
    return {
      url,
      port,
      db,
      log,
      hosts,
      feed,
      close() {
        closing ??= (async () => {
          shuttingDown = true;
          feed.close(); // change streams end at once (clients resume elsewhere): they would hold the server open
          await stopAccepting(srv, db, config.shutdownTimeoutMs, log);
          for (const job of jobs) await job?.stop();
          await functions?.close();
          await objects.close();
          await redis?.quit().catch(() => undefined);
          await changes?.close();
          for (const f of [faults.database, faults.storage, listening, redisFaults]) f?.close();
          await probe.close();
          await db.close();
          log.info('platform stopped');
        })();
        return closing;
      },
    };
  } catch (err) {
    srv.close();
    redisFaults?.close();
    redis?.disconnect();
    await store?.close().catch(() => undefined);
    await functions?.close();
    await changes?.close();
    await db.close().catch(() => undefined);
    throw err;
  }
}
