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
