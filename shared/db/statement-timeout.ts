// Statement timeouts. Every pooled connection starts with DATABASE_STATEMENT_TIMEOUT_MS (a
// startup parameter of the connection: no statement per request). The rare long operations
// (site creation, CSV import, materialization: routes marked `statementTimeout: 'long'`; direct
// CLI calls) get a longer limit inside their own transaction, where SET LOCAL ends with it.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ServiceContext } from '../context.ts';

/** PostgreSQL's error when a statement ran past statement_timeout. */
export const isStatementTimeout = (err: unknown): boolean => {
  const e = err as { code?: unknown; message?: unknown } | null;
  return e?.code === '57014' && typeof e.message === 'string' && e.message.includes('statement timeout');
};

/** Inside a transaction: its statements may run up to `ms` (0: no limit) until it ends. */
export async function setLocalStatementTimeout(tx: EntityManager, ms: number): Promise<void> {
  await tx.execute(`SELECT set_config('statement_timeout', ?, true)`, [String(ms)]);
}

/** Inside the transaction of a long operation: the call's longer limit when it has one (a long route), else nothing. */
export async function allowLongStatements(ctx: ServiceContext, tx: EntityManager): Promise<void> {
  if (ctx.statementTimeoutMs !== undefined) await setLocalStatementTimeout(tx, ctx.statementTimeoutMs);
}
