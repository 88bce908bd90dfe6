// Statement timeouts. Every pooled connection starts with DATABASE_STATEMENT_TIMEOUT_MS (a
// startup parameter of the connection: no statement per request). The rare long operations
// (site creation, CSV import, materialization: routes marked `statementTimeout: 'long'`; direct
// CLI calls) get a longer limit inside their own transaction, where SET LOCAL ends with it
// (db/long-operations.ts longTransaction).
import type { EntityManager } from '@mikro-orm/postgresql';

/** PostgreSQL's error when a statement ran past statement_timeout. */
export const isStatementTimeout = (err: unknown): boolean => {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === '57014' && typeof e.message === 'string' && e.message.includes('statement timeout');
};

/** The statement that sets a transaction's statement timeout; the connection sees it too and raises its client-side limit with it (db/timed-client.ts). */
export const LOCAL_STATEMENT_TIMEOUT_SQL = `SELECT set_config('statement_timeout', ?, true)`;

/** Inside a transaction: its statements may run up to `ms` (0: no limit) until it ends. */
export async function setLocalStatementTimeout(tx: EntityManager, ms: number): Promise<void> {
  await tx.execute(LOCAL_STATEMENT_TIMEOUT_SQL, [String(ms)]);
}

