import { MikroORM, type EntityManager } from '@mikro-orm/postgresql';
import { Migrator } from '@mikro-orm/migrations';
import pg from 'pg';
import { Invitation } from '../invitations/invitation.entity.ts';
import { Member, Organization } from '../organizations/organization.entity.ts';
import { Group, ObjectPermission, Permission } from '../permissions/permission.entity.ts';
import { Domain, Site } from '../sites/site.entity.ts';
import { BlacklistedToken, User } from '../users/user.entity.ts';
import { platformMigrations } from './migrations/platform.ts';
import { setLocalStatementTimeout } from './statement-timeout.ts';
import { sessionSettings, startupOptions, storeRoleDefaults, type SessionSettings } from './pooler.ts';
import { BoundDriver, type BoundConnection } from './driver.ts';
import { pgCode, rows } from './sql.ts';
import { DATABASE_LIMITS, type DatabaseLimits } from '../config.ts';

export type Orm = MikroORM;
export const platformEntities = [User, BlacklistedToken, Organization, Member, Permission, Group, ObjectPermission, Site, Domain, Invitation];

export interface OrmOptions {
  /** Connections of the pool (default DATABASE_LIMITS.poolSize). */
  poolMax?: number;
  /** Acquire timeout, client-side query timeout margin, idle-in-transaction timeout (defaults: DATABASE_LIMITS). */
  limits?: Partial<Pick<DatabaseLimits, 'acquireTimeoutMs' | 'queryTimeoutMarginMs' | 'idleInTransactionTimeoutMs'>>;
  /** statement_timeout of every pooled connection, sent when it connects (0 or unset: none). */
  statementTimeoutMs?: number;
  /** Hot statements named, so that each connection prepares them once (default true; db/driver.ts). */
  preparedStatements?: boolean;
  /**
   * The connections go through a proxy that pools transactions (PgBouncer): no startup parameters
   * (the proxy refuses them; the role's defaults carry them instead: db/pooler.ts), and no backend
   * to terminate by its process id at shutdown (the proxy's ids are not PostgreSQL's).
   */
  proxied?: boolean;
  /**
   * MikroORM's name for the pool's transaction and request contexts: each cluster's pool has its
   * own (db/clusters.ts), or a unit of work of one inside a transaction of another would join that
   * transaction (the contexts are found by name).
   */
  contextName?: string;
}

/** TCP keepalive probes start after a connection has been idle this long (a peer gone without a word is noticed). */
const KEEPALIVE_DELAY_MS = 10_000;

export async function createOrm(clientUrl: string, options: OrmOptions = {}): Promise<Orm> {
  const limits = { ...DATABASE_LIMITS, ...options.limits };
  // The synchronous constructor, not MikroORM.init: the same discovery of the entities listed
  // here, without init's probing for optional packages (fs-utils, seeder, entity generator),
  // which cost every CLI command tens of milliseconds.
  const orm = new MikroORM({
    clientUrl,
    // Values as protocol parameters, never formatted into the SQL text (db/driver.ts).
    driver: BoundDriver,
    entities: platformEntities,
    extensions: [Migrator],
    allowGlobalContext: false,
    contextName: options.contextName ?? 'default',
    debug: false,
    pool: { min: 0, max: options.poolMax ?? DATABASE_LIMITS.poolSize },
    // Startup parameters of each pooled connection (no SET, no round trip per request): intervals
    // in ISO 8601 (`P1DT2H`, the form data tables' duration fields are written in), the
    // statement timeout of requests and the idle-in-transaction timeout (db/pooler.ts: behind a
    // transaction pooler, the role's defaults instead). Client side: how long a
    // request waits for a connection (or for a new one to connect), TCP keepalive, and the margin
    // of each statement's client-side limit over its statement timeout (db/timed-client.ts).
    driverOptions: {
      ...(options.proxied ? {} : { options: startupOptions(sessionSettings(options.statementTimeoutMs ?? 0, limits.idleInTransactionTimeoutMs)) }),
      statementTimeoutMs: options.statementTimeoutMs ?? 0,
      connectionTimeoutMillis: limits.acquireTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      queryTimeoutMarginMs: limits.queryTimeoutMarginMs,
    },
    migrations: {
      migrationsList: platformMigrations,
      tableName: 'platform_migrations',
      snapshot: false,
      silent: true,
      transactional: true,
      allOrNothing: true,
    },
  });
  const connection = orm.em.getConnection() as BoundConnection;
  connection.preparedStatements = options.preparedStatements ?? true;
  connection.proxied = options.proxied ?? false;
  return orm;
}

const MIGRATION_LOCK = 7_340_001; // pg_advisory_lock key: one migrator at a time across processes

export interface MigrationReport {
  applied: string[];
  current: string | null;
}

/**
 * Applies pending platform migrations, serialised across processes by an advisory lock (a session
 * of its own on `clientUrl`: the direct URL, never a transaction pooler). `roleDefaults`: the
 * session settings of the connections a transaction pooler opens, stored as the role's defaults
 * under the same lock (db/pooler.ts).
 */
export async function migratePlatform(orm: Orm, clientUrl: string, roleDefaults?: SessionSettings): Promise<MigrationReport> {
  const lock = new pg.Client({ connectionString: clientUrl });
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    if (roleDefaults) await storeRoleDefaults(lock, roleDefaults);
    // All or nothing in one transaction, without the request statement timeout (DDL on big tables).
    const applied = await orm.em.transactional(async (tx) => {
      await setLocalStatementTimeout(tx as EntityManager, 0);
      return orm.migrator.up({ transaction: tx.getTransactionContext() });
    });
    const executed = await orm.migrator.getExecuted();
    return { applied: applied.map((m) => m.name), current: executed.at(-1)?.name ?? null };
  } finally {
    await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await lock.end();
  }
}

export async function migrationStatus(orm: Orm): Promise<{ executed: string[]; pending: string[] }> {
  // One after the other: each creates the migrations table when missing, and two concurrent
  // CREATE TABLEs on a fresh database fail ("relation platform_migrations already exists").
  const executed = await orm.migrator.getExecuted();
  const pending = await orm.migrator.getPending();
  return { executed: executed.map((m) => m.name), pending: pending.map((m) => m.name) };
}

/** The platform migrations' names in order, read from the migration classes themselves (one list). */
const PLATFORM_MIGRATION_NAMES = platformMigrations.map((M) => new M(undefined as never, undefined as never).name);

/**
 * The platform migrations not applied yet, by one query: what a command checks before it runs
 * (migrationStatus asks the migrator, which creates its table and reads it twice).
 */
export async function pendingPlatformMigrations(orm: Orm): Promise<string[]> {
  let applied: Set<string>;
  try {
    applied = new Set((await rows<{ name: string }>(orm.em.fork(), 'SELECT name FROM platform_migrations')).map((r) => r.name));
  } catch (err) {
    if (pgCode(err) !== '42P01') throw err; // undefined_table: nothing applied yet
    applied = new Set();
  }
  return PLATFORM_MIGRATION_NAMES.filter((name) => !applied.has(name));
}
