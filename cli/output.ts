// Readable output: aligned tables, `key: value` blocks and one-line errors. (--json output
// is the API's own body, printed by BaseCommand.)
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

/** `Error: Invalid input. (email: Enter a valid email address.)`: one line, fields named. */
export function errorLine(err: DomainError): string {
  let line = `Error: ${err.message}`;
  if (err.errors && Object.keys(err.errors).length) {
    line += ` (${Object.entries(err.errors)
      .map(([field, messages]) => `${field}: ${messages.join(' ')}`)
      .join('; ')})`;
  }
  return line.replace(/[\r\n]+/g, ' ');
}
