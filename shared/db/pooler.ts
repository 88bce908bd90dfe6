// The session settings every pooled connection needs, and how they reach it behind a proxy that
// pools transactions (PgBouncer with pool_mode=transaction; docs/operations.md "Behind PgBouncer").
//
// Without a proxy they are startup parameters of each connection (db/orm.ts): nothing per request.
// A transaction pooler refuses startup parameters it does not know (PgBouncer: "unsupported
// startup parameter"), or drops them when told to ignore them, and hands each transaction any of
// its server connections, so a `SET` would reach one of them only. So behind one they are the
// defaults of the platform's role in its database (`ALTER ROLE … IN DATABASE … SET`), which
// PostgreSQL applies to every connection the proxy opens as that role: the migrator stores them
// through the direct connection, under its advisory lock (orm.ts migratePlatform), and the server
// checks through the proxy, before it serves, that its connections have them (checkPooledSessions).
import type pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../config.ts';
import { rows } from './sql.ts';

/** The settings the platform owns, by PostgreSQL's (lower-case) names. */
const NAMES = ['intervalstyle', 'statement_timeout', 'idle_in_transaction_session_timeout'] as const;
export type SessionSettings = Partial<Record<(typeof NAMES)[number], string>>;

/**
 * Intervals written in ISO 8601 (`P1DT2H`, the form data tables' duration fields are read in),
 * the statement timeout of requests and the idle-in-transaction timeout (0: not set, PostgreSQL's
 * or the role's own default applies).
 */
export function sessionSettings(statementTimeoutMs: number, idleInTransactionTimeoutMs: number): SessionSettings {
  return {
    intervalstyle: 'iso_8601',
    ...(statementTimeoutMs ? { statement_timeout: String(statementTimeoutMs) } : {}),
    ...(idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: String(idleInTransactionTimeoutMs) } : {}),
  };
}

/** The session settings of the server's pooled connections by the configuration. */
export const pooledSettings = (config: Pick<Config, 'statementTimeoutMs' | 'db'>): SessionSettings => sessionSettings(config.statementTimeoutMs, config.db.idleInTransactionTimeoutMs);

/** The settings as the `options` startup parameter of a direct connection. */
export const startupOptions = (settings: SessionSettings): string =>
  Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(' ');

/**
 * Makes `settings` the defaults of the session's role in its database (a setting the platform
 * owns and `settings` lacks is reset), changing only what differs. On a direct session, under the
 * migrators' advisory lock (concurrent changes of one role's settings fail in PostgreSQL).
 * Returns the names changed.
 */
export async function storeRoleDefaults(session: pg.Client, settings: SessionSettings): Promise<string[]> {
  const { rows: found } = await session.query<{ config: string[] | null }>(
    `SELECT s.setconfig AS config FROM pg_db_role_setting s
      WHERE s.setrole = (SELECT oid FROM pg_roles WHERE rolname = current_user)
        AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  const stored = new Map((found[0]?.config ?? []).map((entry) => [entry.slice(0, entry.indexOf('=')).toLowerCase(), entry.slice(entry.indexOf('=') + 1)]));
  const changed: string[] = [];
  for (const name of NAMES) {
    const value = settings[name];
    if (stored.get(name) === value) continue;
    // The statement is made by the server from bound values (ALTER ROLE takes no parameters).
    const { rows: made } = await session.query<{ sql: string }>(
      value === undefined
        ? `SELECT format('ALTER ROLE %I IN DATABASE %I RESET %I', current_user, current_database(), $1::text) AS sql`
        : `SELECT format('ALTER ROLE %I IN DATABASE %I SET %I = %L', current_user, current_database(), $1::text, $2::text) AS sql`,
      value === undefined ? [name] : [name, value],
    );
    await session.query(made[0]!.sql);
    changed.push(name);
  }
  return changed;
}

/**
 * What a connection through the proxy has of `settings`: the differences (setting, expected,
 * found). The interval style is what data reads depend on; the caller refuses to serve without it.
 */
export async function pooledSessionDifferences(em: EntityManager, settings: SessionSettings): Promise<{ name: string; expected: string; found: string }[]> {
  const found = new Map(
    (await rows<{ name: string; setting: string }>(em, 'SELECT lower(name) AS name, setting FROM pg_settings WHERE lower(name) = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))', [JSON.stringify(NAMES)])).map((r) => [r.name, r.setting]),
  );
  return Object.entries(settings)
    .filter(([name, value]) => found.get(name)?.toLowerCase() !== value)
    .map(([name, expected]) => ({ name, expected, found: found.get(name) ?? '' }));
}
