// Helpers of the parameterised SQL every module sends (rows of the platform or of a site schema).
import type { EntityManager } from '@mikro-orm/postgresql';
import type { BoundConnection } from './driver.ts';

/** A timestamp as a row holds it: a Date, or PostgreSQL's text form. */
export type Timestamp = Date | string;

/** PostgreSQL's text form (`2026-11-21 20:40:59.772+00`) or a Date, as ISO 8601. */
export function iso(value: Timestamp): string {
  if (value instanceof Date) return value.toISOString();
  return new Date(value.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00')).toISOString();
}

/** Rows of a statement (`?` placeholders, values bound: db/bind.ts), in `em`'s transaction if it has one. */
export async function rows<T>(em: EntityManager, sql: string, params: unknown[] = []): Promise<T[]> {
  return (await em.execute(sql, params as never[])) as T[];
}

/**
 * The same for the hot path's reads: outside a transaction, a statement prepared once per pooled
 * connection (db/driver.ts); inside one, as `rows`.
 */
export async function preparedRows<T>(em: EntityManager, sql: string, params: unknown[] = []): Promise<T[]> {
  if (em.isInTransaction()) return rows<T>(em, sql, params);
  return (em.getConnection() as BoundConnection).prepared<T>(sql, params);
}

export async function firstRow<T>(em: EntityManager, sql: string, params: unknown[] = []): Promise<T | undefined> {
  return (await rows<T>(em, sql, params))[0];
}

export async function countOf(em: EntityManager, sql: string, params: unknown[] = []): Promise<number> {
  const row = await firstRow<{ n: string | number }>(em, sql, params);
  return Number(row?.n ?? 0);
}

/** The PostgreSQL error code of a failed statement (or of a wrapper's cause). */
export function pgCode(err: unknown): string | undefined {
  let e = err as { code?: string; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
    e = e.cause as typeof e;
  }
  return undefined;
}

/**
 * `column = ?` for each of `columns` whose value in `values` is defined, with those values in
 * order: the SET list of a partial update (the columns come from the code, never from input).
 */
export function assignments(values: Record<string, unknown>, columns: readonly string[]): { set: string[]; params: unknown[] } {
  const given = columns.filter((c) => values[c] !== undefined);
  return { set: given.map((c) => `${c} = ?`), params: given.map((c) => values[c]) };
}

/** A PostgreSQL identifier, double-quoted (names are validated identifiers already; this refuses others). */
export function quoteIdent(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) throw new Error(`Invalid identifier ${JSON.stringify(name)}.`);
  return `"${name}"`;
}

/**
 * Runs a statement written with PostgreSQL's own `$n` placeholders (DDL has none): every `?` in
 * it is SQL text — a regular expression's in a CHECK, say — never a placeholder of db/bind.ts.
 */
export async function executeNative<T>(em: EntityManager, sql: string, params: readonly unknown[] = []): Promise<T[]> {
  const escaped = sql.replaceAll('?', '\\?');
  if (!params.length) return rows<T>(em, escaped);
  const values: unknown[] = [];
  const text = escaped.replace(/\$(\d+)/g, (_, n: string) => {
    values.push(params[Number(n) - 1]);
    return '?';
  });
  return rows<T>(em, text, values);
}
