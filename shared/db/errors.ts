// What of a PostgreSQL error may be logged or stored. The driver's error carries values:
// `detail` ("Key (email)=(ada@example.com) already exists"), `where`, `internalQuery`, the
// message MikroORM extends with that detail, and for data and syntax errors PostgreSQL quotes
// the offending input (or an inlined SQL token) in the message itself. Kept: the SQLSTATE, the
// names of the objects involved and the message without any of that.

export interface DatabaseErrorSummary {
  type: string;
  code: string;
  message: string;
  schema?: string;
  table?: string;
  column?: string;
  constraint?: string;
  dataType?: string;
  stack?: string;
}

const NAMES = ['schema', 'table', 'column', 'constraint', 'dataType'] as const;

/** A PostgreSQL error as `pg` reports it (also wrapped by MikroORM, which copies its fields). */
export function isDatabaseError(err: unknown): err is Error & Record<string, unknown> {
  const e = err as { code?: unknown; severity?: unknown } | null;
  return err instanceof Error && typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.severity === 'string';
}

/** The message without the values PostgreSQL or MikroORM put into it. */
function safeMessage(code: string, message: string): string {
  const first = message.split('\n')[0]!; // MikroORM appends "\n - detail: …"
  // Classes 22 (data exception) and 42601 (syntax error) quote the input or an inlined SQL token.
  return code.startsWith('22') || code === '42601' ? first.replace(/"(?:[^"]|"")*"/g, '"[redacted]"') : first;
}

export function summarizeDatabaseError(err: Error & Record<string, unknown>): DatabaseErrorSummary {
  const code = err.code as string;
  const message = safeMessage(code, err.message);
  const out: DatabaseErrorSummary = { type: err.constructor?.name ?? 'Error', code, message };
  for (const name of NAMES) if (typeof err[name] === 'string') out[name] = err[name] as string;
  const frames = (err.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
  out.stack = [`${out.type}: ${message}`, ...frames].join('\n');
  return out;
}

/** A one-line description of any error that is safe to log or store. */
export function describeError(err: unknown): string {
  if (isDatabaseError(err)) return summarizeDatabaseError(err).message;
  return err instanceof Error ? err.message : String(err);
}

// --- faults: the database unreachable, a disk full -----------------------------------------

/**
 * Set (own, non-enumerable; MikroORM copies it when it wraps the error) on an error of a
 * connection of ours that failed to connect or whose socket failed (db/driver.ts): a refused or
 * reset connection says nothing of which service failed unless the database layer says so.
 */
export const UNAVAILABLE_MARK = 'databaseUnavailable';

export function markUnavailable<E>(err: E): E {
  if (err instanceof Error && !Object.hasOwn(err, UNAVAILABLE_MARK)) Object.defineProperty(err, UNAVAILABLE_MARK, { value: true });
  return err;
}

/** SQLSTATEs of a server that is going away or cannot take the connection (class 08 is matched whole). */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);
/** Errors pg-pool makes itself, without a code: no connection within the acquire timeout; a pool ended (shutdown). */
const POOL_MESSAGES = ['timeout exceeded when trying to connect', 'Connection terminated due to connection timeout', 'Cannot use a pool after calling end on the pool'];

/** The error and its causes, innermost last. */
function* chain(err: unknown): Generator<Error & { code?: unknown }> {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) yield e;
}

/**
 * Whether the database could not be reached or stopped answering: a connection refused, reset,
 * not made or not answered in time (driver.ts marks those), a pooled connection not acquired in
 * time, SQLSTATE class 08 (connection exception), 57P01–57P03 (admin or crash shutdown, cannot
 * connect now) or 53300 (too many connections). The request may succeed when retried: 503.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (const e of chain(err)) {
    if ((e as unknown as Record<string, unknown>)[UNAVAILABLE_MARK] === true) return true;
    const code = typeof e.code === 'string' ? e.code : '';
    if (/^08[0-9A-Z]{3}$/.test(code) || UNAVAILABLE_STATES.has(code)) return true;
    if (POOL_MESSAGES.some((m) => e.message.startsWith(m))) return true;
  }
  return false;
}

/** Whether a write failed for want of space: ENOSPC or EDQUOT from a file (storage, spooled uploads), SQLSTATE 53100 (disk_full) from PostgreSQL. */
export function isStorageFull(err: unknown): boolean {
  for (const e of chain(err)) if (e.code === 'ENOSPC' || e.code === 'EDQUOT' || e.code === '53100') return true;
  return false;
}
