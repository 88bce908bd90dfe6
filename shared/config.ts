// The platform's configuration: read from the environment once, checked, typed.
// A bad value stops the start with a message that names the variable.
import path from 'node:path';
import { loadStorageConfig, type StorageConfig } from './storage/objstore/config.ts';
import type { FunctionsConfig } from './functions/runtime.ts';
import { parseCidr, type OutboundRules } from './net/outbound.ts';

export const ENVIRONMENTS = ['production', 'staging', 'dev', 'test'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface RateLimitConfig {
  enabled: boolean;
  /** Prefix of the counter keys (in Redis, shared by every process with the same prefix). */
  keyPrefix: string;
  /** Cloud console (/api/cloud/…), authenticated: requests per minute per user. */
  standardPerMinute: number;
  /** Token issue: attempts per hour per client address. */
  authPerHour: number;
  /** Writes (POST, PUT, PATCH, DELETE) by an authenticated user: per minute. */
  writePerMinute: number;
  /** Any authenticated request: per hour per user. */
  userPerHour: number;
  /** Any anonymous request: per hour per client address. */
  anonPerHour: number;
  /** Anonymous burst protection: per minute per client address. */
  burstPerMinute: number;
}

/** What bounds the PostgreSQL pool and its connections (docs/configuration.md "Timeouts and faults"). */
export interface DatabaseLimits {
  /** Connections of the server's pool (DATABASE_POOL_SIZE, default 20). */
  poolSize: number;
  /** How long a request waits for a pooled connection, or for a new one to connect (DATABASE_ACQUIRE_TIMEOUT_MS, default 5 s); then 503. */
  acquireTimeoutMs: number;
  /** The client-side limit of a statement is its statement timeout plus this (DATABASE_QUERY_TIMEOUT_MARGIN_MS, default 5 s): a database that stops answering fails the statement. */
  queryTimeoutMarginMs: number;
  /** PostgreSQL's idle_in_transaction_session_timeout of every pooled connection (DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS, default 60 s; 0: none). */
  idleInTransactionTimeoutMs: number;
  /** The limit of /readyz's database check, on a connection of its own (DATABASE_READY_TIMEOUT_MS, default 1.5 s). */
  readyTimeoutMs: number;
}

/** Defaults of the pool's limits, also for pools made without a configuration (tests, benchmarks, createOrm). */
export const DATABASE_LIMITS: DatabaseLimits = { poolSize: 20, acquireTimeoutMs: 5_000, queryTimeoutMarginMs: 5_000, idleInTransactionTimeoutMs: 60_000, readyTimeoutMs: 1_500 };

/** How many long operations (imports, exports, materializations, migrations, site creation) run at once (shared/db/long-operations.ts). */
export interface LongOperationLimits {
  /** Per site (LONG_OPERATIONS_PER_SITE, default 2). */
  perSite: number;
  /** In the process (LONG_OPERATIONS_TOTAL, default half the pool). */
  total: number;
  /** How long one waits for a free slot before 429 (the site's) or 503 (the process's) (LONG_OPERATION_WAIT_MS, default 5 s). */
  waitMs: number;
  /** A CSV export whose reader takes nothing for this long is cut off, its connection and slot freed (LONG_OPERATION_STALL_MS, default 60 s; 0: never). */
  stallMs: number;
}

/** Change streams (shared/realtime/feed.ts) and the change log's retention (changelog.ts pruneChangeLogs). */
export interface RealtimeConfig {
  /** Streams one server process holds at most (REALTIME_MAX_SUBSCRIBERS, default 20,000)… */
  maxSubscribers: number;
  /** …and of one site (REALTIME_MAX_PER_SITE, default 5,000): 429 beyond. */
  maxPerSite: number;
  /** Bytes a client may leave unread before its stream is dropped (REALTIME_MAX_BUFFERED_BYTES, default 1 MiB). */
  maxBufferedBytes: number;
  /** A comment line after this much silence (REALTIME_HEARTBEAT_MS, default 15,000). */
  heartbeatMs: number;
  /** Changes are kept this long (REALTIME_RETENTION_HOURS, default 24)… */
  retentionHours: number;
  /** …and at most this many per table (REALTIME_RETENTION_ROWS, default 1,000,000), by the pruning job. */
  retentionRows: number;
}

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  /**
   * A direct connection to the same database (DATABASE_DIRECT_URL) when DATABASE_URL is a proxy
   * that pools transactions (PgBouncer): what needs a session (LISTEN, migrations and their
   * advisory lock, CLI commands) uses it. Unset or equal to DATABASE_URL: no proxy.
   */
  databaseDirectUrl: string | undefined;
  /** Longest statement of a request (DATABASE_STATEMENT_TIMEOUT_MS, per pooled connection; 0: none). */
  statementTimeoutMs: number;
  /** Longest statement of a long operation's transaction (DATABASE_LONG_STATEMENT_TIMEOUT_MS; 0: none). */
  longStatementTimeoutMs: number;
  /** Hot statements prepared once per pooled connection (DATABASE_PREPARED_STATEMENTS; default off behind a proxy, DATABASE_DIRECT_URL set). */
  preparedStatements: boolean;
  /** Pool size and connection timeouts. */
  db: DatabaseLimits;
  /** Concurrent long operations per site and per process. */
  longOperations: LongOperationLimits;
  dataDir: string;
  /** Where pg_dump and pg_restore are (PG_BIN_DIR); else /usr/lib/postgresql/{server major}/bin, else the PATH (site backup and restore). */
  pgBinDir?: string;
  embeddedPgPort: number;
  redisUrl: string | undefined;
  /** Redis client limits: a command unanswered after commandTimeoutMs (REDIS_COMMAND_TIMEOUT_MS, 500 ms) or a connection not made after connectTimeoutMs (REDIS_CONNECT_TIMEOUT_MS, 2 s) fails, and the rate limits count in process memory. */
  redis: { commandTimeoutMs: number; connectTimeoutMs: number };
  secretKey: string | undefined;
  admin: { username?: string; password?: string; email?: string };
  baseDomain: string;
  platformHosts: string[];
  environment: Environment;
  rateLimit: RateLimitConfig;
  smtpUrl: string | undefined;
  /** How long an invitation stays acceptable (INVITATION_TTL_DAYS, default 7). */
  invitationTtlDays: number;
  logLevel: LogLevel;
  accessTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  /** How long a browser session of the browsable API lasts from sign-in (SESSION_TTL_SECONDS, default 8 hours). */
  sessionTtlSeconds: number;
  /** The key version new secret values are encrypted with (SECRETS_KEY_VERSION, default 1; rotation: docs/api-conventions.md). */
  secretsKeyVersion: number;
  corsOrigins: string[];
  bodyLimitBytes: number;
  /** Request bodies of the records routes (bulk writes of up to 10,000 records). */
  dataBodyLimitBytes: number;
  shutdownTimeoutMs: number;
  /** How often a server prunes expired token-blacklist rows (BLACKLIST_PRUNE_INTERVAL_MS; 0: never). */
  blacklistPruneIntervalMs: number;
  trustProxy: boolean;
  /** How many proxies append to X-Forwarded-For (TRUST_PROXY_HOPS): the client is that many entries from the right. */
  trustProxyHops: number;
  /** Public base URL used in absolute links (pagination); derived from host and port when unset. */
  publicUrl: string | undefined;
  /** What one user may create (platform superusers and staff are exempt); 0 = no limit. */
  quotas: QuotaConfig;
  /** The deepest hierarchy traversal a request may ask for (DATA_SERVICE_GRAPH_MAX_DEPTH, default 10). */
  graphMaxDepth: number;
  /** The document-library storage provider (DOCLIB_ENABLED, default false: `doclib` buckets answer 503). */
  doclibEnabled: boolean;
  /** Social login providers and redirect URIs may be plain http:// (SOCIAL_LOGIN_ALLOW_HTTP, default false: https only, http for localhost redirects). */
  socialAllowHttp: boolean;
  /** Requests to URLs a tenant chose (social login providers): what the outbound guard allows (docs/outbound.md). */
  outbound: OutboundRules;
  /** DNS servers asked for domain verification records (DNS_SERVERS; default: the system's). */
  dnsServers: string[];
  /** How often a server refreshes storage usage counters and sweeps unreferenced blobs (STORAGE_MAINTENANCE_INTERVAL_MS; 0: never). */
  storageMaintenanceIntervalMs: number;
  /** Where objects' bytes live: a directory or an S3 service (docs/configuration.md "Storage"). */
  storage: StorageConfig;
  /** The functions' sandboxes and job queue (docs/configuration.md "Functions"). */
  functions: FunctionsConfig;
  /** Frontend workers' builds (docs/frontend-workers.md "Limits"). */
  workers: WorkersConfig;
  /** Change streams and the change log (docs/realtime.md "Limits"). */
  realtime: RealtimeConfig;
  /** The largest app package an import takes (PACKAGE_UPLOAD_LIMIT_BYTES, default 8 GiB; docs/app-packages.md). */
  packageUploadLimitBytes: number;
}

export interface WorkersConfig {
  /** The largest archive upload (WORKER_UPLOAD_LIMIT_BYTES, default 256 MiB: above BODY_LIMIT_BYTES, it applies to these routes only). */
  uploadLimitBytes: number;
  /** Files in a build (WORKER_MAX_FILES, default 100,000). */
  maxFiles: number;
  /** Bytes of a build's extracted files (WORKER_MAX_BUILD_BYTES, default 1 GiB). */
  maxTotalBytes: number;
  /** Builds kept per worker, the newest (WORKER_KEEP_BUILDS; default 0: all). The active build is always kept. */
  keepBuilds: number;
}

export interface QuotaConfig {
  /** Organizations one user may own (QUOTA_ORGANIZATIONS_PER_USER, default 10). */
  organizationsPerUser: number;
  /** Sites one organization may have (QUOTA_SITES_PER_ORGANIZATION, default 25). */
  sitesPerOrganization: number;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export type Env = Record<string, string | undefined>;

export function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, def: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const v = str(env, name);
  if (v === undefined) return def;
  if (!/^\d+$/.test(v)) throw new ConfigError(`${name} must be a whole number, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

export function bool(env: Env, name: string, def: boolean): boolean {
  const v = str(env, name)?.toLowerCase();
  if (v === undefined) return def;
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(v)}`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], def: T): T {
  const v = str(env, name);
  if (v === undefined) return def;
  if (!(allowed as readonly string[]).includes(v)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got ${JSON.stringify(v)}`);
  }
  return v as T;
}

export function url(env: Env, name: string, protocols: string[]): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    throw new ConfigError(`${name} is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got ${parsed.protocol}`);
  }
  return v;
}

function list(env: Env, name: string, def: string[]): string[] {
  const v = str(env, name);
  if (v === undefined) return def;
  return v.split(',').map((s) => s.trim()).filter(Boolean);
}

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

function loadOutbound(env: Env): OutboundRules {
  const allowHosts = list(env, 'OUTBOUND_ALLOW_HOSTS', []).map((h) => h.toLowerCase());
  for (const h of allowHosts) {
    if (!HOSTNAME.test(h)) throw new ConfigError(`OUTBOUND_ALLOW_HOSTS contains an invalid host name: ${JSON.stringify(h)}`);
  }
  const allowCidrs = list(env, 'OUTBOUND_ALLOW_CIDRS', []);
  for (const c of allowCidrs) {
    try {
      parseCidr(c);
    } catch {
      throw new ConfigError(`OUTBOUND_ALLOW_CIDRS contains an invalid address range: ${JSON.stringify(c)} (for example 10.0.0.0/8 or fd00::/8)`);
    }
  }
  const allowPorts = list(env, 'OUTBOUND_ALLOW_PORTS', ['80', '443']).map((p) => {
    if (!/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535) throw new ConfigError(`OUTBOUND_ALLOW_PORTS contains an invalid port: ${JSON.stringify(p)}`);
    return Number(p);
  });
  return {
    allowHosts,
    allowCidrs,
    allowPorts,
    timeoutMs: int(env, 'OUTBOUND_TIMEOUT_MS', 10_000, 100, 120_000),
    maxResponseBytes: int(env, 'OUTBOUND_MAX_RESPONSE_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    maxPerSite: int(env, 'OUTBOUND_MAX_PER_SITE', 8, 1, 1000),
  };
}

/** DNS_SERVERS: addresses with an optional port (`10.0.0.2`, `127.0.0.1:5353`, `[::1]:53`). */
function dnsServers(env: Env): string[] {
  const servers = list(env, 'DNS_SERVERS', []);
  for (const server of servers) {
    const m = /^(?:\[([0-9a-f:.]+)\]|([0-9.]+))(?::(\d{1,5}))?$/i.exec(server);
    let ok = !!m && (m[3] === undefined || (Number(m[3]) >= 1 && Number(m[3]) <= 65535));
    try {
      if (ok) parseCidr(m![1] ?? m![2]!);
    } catch {
      ok = false;
    }
    if (!ok) throw new ConfigError(`DNS_SERVERS contains an invalid server: ${JSON.stringify(server)} (an IP address, optionally with :port; IPv6 in brackets)`);
  }
  return servers;
}

export function loadConfig(env: Env = process.env): Config {
  const secretKey = str(env, 'PLATFORM_SECRET_KEY');
  if (secretKey !== undefined && secretKey.length < 32) {
    throw new ConfigError('PLATFORM_SECRET_KEY must be at least 32 characters long');
  }
  const baseDomain = str(env, 'PLATFORM_BASE_DOMAIN') ?? 'localhost';
  if (!HOSTNAME.test(baseDomain)) throw new ConfigError(`PLATFORM_BASE_DOMAIN is not a valid host name: ${JSON.stringify(baseDomain)}`);
  const platformHosts = list(env, 'PLATFORM_HOSTS', ['localhost', '127.0.0.1']).map((h) => h.toLowerCase());
  for (const h of platformHosts) {
    if (!HOSTNAME.test(h)) throw new ConfigError(`PLATFORM_HOSTS contains an invalid host name: ${JSON.stringify(h)}`);
  }
  const adminEmail = str(env, 'PLATFORM_ADMIN_EMAIL');
  if (adminEmail !== undefined && !/^[^@\s]+@[^@\s]+$/.test(adminEmail)) {
    throw new ConfigError('PLATFORM_ADMIN_EMAIL is not a valid e-mail address');
  }
  const adminPassword = str(env, 'PLATFORM_ADMIN_PASSWORD');
  if (adminPassword !== undefined && adminPassword.length < 8) {
    throw new ConfigError('PLATFORM_ADMIN_PASSWORD must be at least 8 characters long');
  }
  const poolSize = int(env, 'DATABASE_POOL_SIZE', DATABASE_LIMITS.poolSize, 1, 1000);
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const directUrl = url(env, 'DATABASE_DIRECT_URL', ['postgres:', 'postgresql:']);
  if (directUrl && !databaseUrl) throw new ConfigError('DATABASE_DIRECT_URL needs DATABASE_URL (the proxy it bypasses)');
  const databaseDirectUrl = directUrl === databaseUrl ? undefined : directUrl;
  return {
    port: int(env, 'PORT', 8000, 0, 65535),
    host: str(env, 'HOST') ?? '127.0.0.1',
    databaseUrl,
    databaseDirectUrl,
    statementTimeoutMs: int(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 30_000, 0, 2_147_483_647),
    longStatementTimeoutMs: int(env, 'DATABASE_LONG_STATEMENT_TIMEOUT_MS', 600_000, 0, 2_147_483_647),
    preparedStatements: bool(env, 'DATABASE_PREPARED_STATEMENTS', !databaseDirectUrl),
    db: {
      poolSize,
      acquireTimeoutMs: int(env, 'DATABASE_ACQUIRE_TIMEOUT_MS', DATABASE_LIMITS.acquireTimeoutMs, 100, 600_000),
      queryTimeoutMarginMs: int(env, 'DATABASE_QUERY_TIMEOUT_MARGIN_MS', DATABASE_LIMITS.queryTimeoutMarginMs, 100, 600_000),
      idleInTransactionTimeoutMs: int(env, 'DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS', DATABASE_LIMITS.idleInTransactionTimeoutMs, 0, 2_147_483_647),
      readyTimeoutMs: int(env, 'DATABASE_READY_TIMEOUT_MS', DATABASE_LIMITS.readyTimeoutMs, 100, 60_000),
    },
    longOperations: {
      perSite: int(env, 'LONG_OPERATIONS_PER_SITE', 2, 1, 1000),
      total: int(env, 'LONG_OPERATIONS_TOTAL', Math.max(1, Math.floor(poolSize / 2)), 1, 1000),
      waitMs: int(env, 'LONG_OPERATION_WAIT_MS', 5_000, 0, 600_000),
      stallMs: int(env, 'LONG_OPERATION_STALL_MS', 60_000, 0, 2_147_483_647),
    },
    dataDir: path.resolve(str(env, 'PLATFORM_DATA_DIR') ?? '.data'),
    pgBinDir: str(env, 'PG_BIN_DIR'),
    embeddedPgPort: int(env, 'EMBEDDED_PG_PORT', 0, 0, 65535),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redis: {
      commandTimeoutMs: int(env, 'REDIS_COMMAND_TIMEOUT_MS', 500, 10, 60_000),
      connectTimeoutMs: int(env, 'REDIS_CONNECT_TIMEOUT_MS', 2_000, 10, 60_000),
    },
    secretKey,
    admin: { username: str(env, 'PLATFORM_ADMIN_USERNAME'), password: adminPassword, email: adminEmail },
    baseDomain,
    platformHosts,
    environment: oneOf(env, 'ENVIRONMENT', ENVIRONMENTS, 'production'),
    rateLimit: {
      enabled: bool(env, 'RATE_LIMIT_ENABLED', true),
      keyPrefix: str(env, 'RATE_LIMIT_KEY_PREFIX') ?? 'rl',
      standardPerMinute: int(env, 'RATE_LIMIT_STANDARD_PER_MINUTE', 100, 1),
      authPerHour: int(env, 'RATE_LIMIT_AUTH_PER_HOUR', 20, 1),
      writePerMinute: int(env, 'RATE_LIMIT_WRITE_PER_MINUTE', 30, 1),
      userPerHour: int(env, 'RATE_LIMIT_USER_PER_HOUR', 1000, 1),
      anonPerHour: int(env, 'RATE_LIMIT_ANON_PER_HOUR', 100, 1),
      burstPerMinute: int(env, 'RATE_LIMIT_BURST_PER_MINUTE', 10, 1),
    },
    smtpUrl: url(env, 'SMTP_URL', ['smtp:', 'smtps:']),
    invitationTtlDays: int(env, 'INVITATION_TTL_DAYS', 7, 1, 365),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    accessTokenTtlSeconds: 15 * 60,
    refreshTokenTtlSeconds: int(env, 'JWT_REFRESH_TTL_SECONDS', 7 * 24 * 3600, 60),
    sessionTtlSeconds: int(env, 'SESSION_TTL_SECONDS', 8 * 3600, 60),
    secretsKeyVersion: int(env, 'SECRETS_KEY_VERSION', 1, 1, 1_000_000),
    corsOrigins: list(env, 'CORS_ORIGINS', []),
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1024 * 1024, 1024),
    dataBodyLimitBytes: int(env, 'DATA_BODY_LIMIT_BYTES', 32 * 1024 * 1024, 1024),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0),
    blacklistPruneIntervalMs: int(env, 'BLACKLIST_PRUNE_INTERVAL_MS', 3_600_000, 0, 2_147_483_647),
    trustProxy: bool(env, 'TRUST_PROXY', false),
    trustProxyHops: int(env, 'TRUST_PROXY_HOPS', 1, 1, 100),
    publicUrl: url(env, 'PLATFORM_PUBLIC_URL', ['http:', 'https:']),
    quotas: {
      organizationsPerUser: int(env, 'QUOTA_ORGANIZATIONS_PER_USER', 10),
      sitesPerOrganization: int(env, 'QUOTA_SITES_PER_ORGANIZATION', 25),
    },
    graphMaxDepth: int(env, 'DATA_SERVICE_GRAPH_MAX_DEPTH', 10, 0, 100),
    doclibEnabled: bool(env, 'DOCLIB_ENABLED', false),
    socialAllowHttp: bool(env, 'SOCIAL_LOGIN_ALLOW_HTTP', false),
    outbound: loadOutbound(env),
    dnsServers: dnsServers(env),
    storageMaintenanceIntervalMs: int(env, 'STORAGE_MAINTENANCE_INTERVAL_MS', 3_600_000, 0, 2_147_483_647),
    storage: loadStorageConfig(env),
    functions: functionsConfig(env),
    realtime: {
      maxSubscribers: int(env, 'REALTIME_MAX_SUBSCRIBERS', 20_000, 0),
      maxPerSite: int(env, 'REALTIME_MAX_PER_SITE', 5_000, 0),
      maxBufferedBytes: int(env, 'REALTIME_MAX_BUFFERED_BYTES', 1024 * 1024, 1024),
      heartbeatMs: int(env, 'REALTIME_HEARTBEAT_MS', 15_000, 1000, 600_000),
      retentionHours: int(env, 'REALTIME_RETENTION_HOURS', 24, 1, 24 * 365),
      retentionRows: int(env, 'REALTIME_RETENTION_ROWS', 1_000_000, 1000),
    },
    workers: {
      uploadLimitBytes: int(env, 'WORKER_UPLOAD_LIMIT_BYTES', 256 * 1024 * 1024, 1024),
      maxFiles: int(env, 'WORKER_MAX_FILES', 100_000, 1),
      maxTotalBytes: int(env, 'WORKER_MAX_BUILD_BYTES', 1024 * 1024 * 1024, 1024),
      keepBuilds: int(env, 'WORKER_KEEP_BUILDS', 0, 0, 100_000),
    },
    packageUploadLimitBytes: int(env, 'PACKAGE_UPLOAD_LIMIT_BYTES', 8 * 1024 ** 3, 1024),
  };
}

function functionsConfig(env: Env): FunctionsConfig {
  const workers = int(env, 'FUNCTION_WORKERS', 2, 1, 64);
  return {
    workers,
    workerConcurrency: int(env, 'FUNCTION_WORKER_CONCURRENCY', 8, 1, 256),
    cpuLimitMs: int(env, 'FUNCTION_CPU_LIMIT_MS', 30_000, 10, 900_000),
    // A sandbox's memory is a 32-bit WebAssembly memory of its own: 2,000 MiB at most.
    memoryLimitMb: int(env, 'FUNCTION_MEMORY_LIMIT_MB', 64, 4, 2000),
    queueEnabled: bool(env, 'FUNCTION_QUEUE_ENABLED', true),
    prewarm: bool(env, 'FUNCTION_PREWARM', true),
    apiUrl: url(env, 'FUNCTION_API_URL', ['http:']),
    siteThreads: int(env, 'FUNCTION_SITE_THREADS', Math.max(1, Math.floor(workers / 2)), 1, workers),
    siteQueue: int(env, 'FUNCTION_SITE_QUEUE', 100, 1, 100_000),
    siteCpuPercent: int(env, 'FUNCTION_SITE_CPU_PERCENT', 25, 1, 100),
    siteBacklog: int(env, 'FUNCTION_SITE_BACKLOG', 10_000, 1, 10_000_000),
  };
}
