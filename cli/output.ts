// Readable output: aligned tables, `key: value` blocks and one-line errors. (--json output
// is the API's own body, printed by BaseCommand.)
import type { PageEnvelope } from '../shared/common/pagination.ts';
import { DomainError } from '../shared/errors.ts';

export type Cell = string | number | boolean | null | undefined;

/** A value as shown to a person: booleans as yes/no, null as "-". */
export function cell(value: Cell): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  return String(value).replace(/[\r\n\t]+/g, ' ');
}

export interface Column<T> {
  header: string;
  get: (row: T) => Cell;
}

/** An aligned table: upper-case headers, columns two spaces apart, no trailing blanks. */
export function table<T>(rows: T[], columns: Column<T>[]): string {
  const grid = [columns.map((c) => c.header.toUpperCase()), ...rows.map((r) => columns.map((c) => cell(c.get(r))))];
  const widths = columns.map((_, i) => Math.max(...grid.map((line) => line[i].length)));
  return grid.map((line) => line.map((text, i) => (i === line.length - 1 ? text : text.padEnd(widths[i]))).join('  ').trimEnd()).join('\n');
}

/** `key: value` lines with the values aligned. */
export function keyValues(object: Record<string, unknown>): string {
  const keys = Object.keys(object);
  const width = Math.max(0, ...keys.map((k) => k.length)) + 1;
  return keys
    .map((k) => {
      const v = object[k];
      const text = v !== null && typeof v === 'object' ? JSON.stringify(v) : cell(v as Cell);
      return `${`${k}:`.padEnd(width)} ${text}`.trimEnd();
    })
    .join('\n');
}

/**
 * An error as a person reads it on stderr: `Error: <message>`, then each field's message on a
 * line of its own, the field first (`  json_schema: Field 'age': invalid type …`; a message
 * about no one field, `non_field_errors`, without it).
 */
export function errorText(err: DomainError): string {
  const lines = [`Error: ${err.message}`];
  for (const [field, messages] of Object.entries(err.errors ?? {})) {
    for (const m of messages) lines.push(`  ${field === 'non_field_errors' ? '' : `${field}: `}${m}`);
  }
  return lines.map((line) => line.replace(/[\r\n]+/g, ' ')).join('\n');
}

/** `Error: Invalid input. (email: Enter a valid email address.)`: one line, fields named (a line of a report). */
export function errorLine(err: DomainError): string {
  let line = `Error: ${err.message}`;
  if (err.errors && Object.keys(err.errors).length) {
    line += ` (${Object.entries(err.errors)
      .map(([field, messages]) => `${field}: ${messages.join(' ')}`)
      .join('; ')})`;
  }
  return line.replace(/[\r\n]+/g, ' ');
}

/** An ISO timestamp as `YYYY-MM-DD HH:MM` (null stays null, shown as "-"). */
export const when = (iso: string | null) => (iso ? iso.slice(0, 16).replace('T', ' ') : null);

/** Rows as a table above a footer saying how many there are (`[one, many]` names them), how many are shown and how to see more. */
export function listTable<T>(rows: T[], columns: Column<T>[], [one, many]: [string, string], count = rows.length, next?: string | null): string {
  const page = next ? ` (next: --page ${new URL(next).searchParams.get('page') ?? '1'})` : '';
  const footer = `${count} ${count === 1 ? one : many}${rows.length < count ? `, ${rows.length} shown` : ''}${page}`;
  return rows.length ? `${table(rows, columns)}\n\n${footer}` : footer;
}

/** A page as a table, with that footer. */
export const pageTable = <T>(page: PageEnvelope<T>, columns: Column<T>[], nouns: [string, string]) => listTable(page.results, columns, nouns, page.count, page.next);

/** An ISO timestamp (shown as `when()` in a table). */
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d/;

/**
 * Columns from a compact spec: `slug name is_active:active created_at:created`, each a field
 * (dotted for a nested one) and its header (`_` as spaces); timestamps as `when()`; a
 * field named in `computed` takes its value from there.
 */
export function columns<T>(spec: string, computed: Record<string, (row: T) => Cell> = {}): Column<T>[] {
  return spec.split(/\s+/).filter(Boolean).map((token) => {
    const [field, header = field] = token.split(':') as [string, string?];
    const value = (row: T) => field.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | null | undefined)?.[k], row) as Cell;
    const shown = (row: T) => {
      const v = value(row);
      return typeof v === 'string' && ISO_TIME.test(v) ? when(v) : v;
    };
    return { header: header.replaceAll('_', ' '), get: computed[field] ?? shown };
  });
}

/** A page's render: its items as a table of `spec`'s columns, and its footer. */
export const pageOf =
  <T>(nouns: [string, string], spec: string, computed?: Record<string, (row: T) => Cell>) =>
  (page: PageEnvelope<T>) =>
    pageTable(page, columns(spec, computed), nouns);

/** A list's render (`{data: [...]}` or an array): its items as a table of `spec`'s columns, and a count. */
export const listOf =
  <T>(nouns: [string, string], spec: string, computed?: Record<string, (row: T) => Cell>) =>
  (body: { data: T[] } | T[]) =>
    listTable(Array.isArray(body) ? body : body.data, columns(spec, computed), nouns);
