// Shared pieces of the `table`, `data`, `edges`, `policy` and `demo` commands: flags, input
// files, record conditions, records as text, progress lines.
import fs from 'node:fs';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Flags } from '@oclif/core';
import { DomainError, fieldError } from '../shared/errors.ts';
import { keyValues, table, type Cell } from './output.ts';
import { parseJson } from './flags.ts';
export { jsonObject, siteFlag } from './flags.ts';

export type RecordRow = Record<string, unknown>;

export const appFlag = Flags.string({ summary: 'The app (slug).', required: true });
export const tableFlag = Flags.string({ summary: 'The data table (name).', required: true });
export const filterFlag = Flags.string({ summary: 'A condition `field=value` or `field__op=value` (repeatable; all must hold).', description: 'Operators: eq ne gt gte lt lte in nin (comma lists) contains icontains startswith istartswith endswith iendswith isnull between (low,high).', multiple: true });
export const sortFlag = Flags.string({ summary: 'Sort: comma list of fields, `-` for descending (e.g. -created_at,name).' });

/** The query of a list or export: the conditions (`--filter age__gte=30`; a repeated one: an array), then the named parameters that are set. */
export function recordQuery(filters: string[] | undefined, named: Record<string, string | undefined>): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const f of filters ?? []) {
    const eq = f.indexOf('=');
    if (eq <= 0) throw fieldError('filter', `Expected field=value or field__op=value, got ${JSON.stringify(f)}.`);
    const [key, value] = [f.slice(0, eq), f.slice(eq + 1)];
    const prev = query[key];
    query[key] = prev === undefined ? value : [...(Array.isArray(prev) ? prev : [prev]), value];
  }
  for (const [key, value] of Object.entries(named)) if (value !== undefined) query[key] = value;
  return query;
}

/** `read(file)`, or a clear one-line error naming the flag when the file cannot be read. */
function readable<T>(file: string, flag: string, read: (file: string) => T): T {
  try {
    return read(file);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'No such file.' : (err as Error).message;
    throw fieldError(flag, `Cannot read ${file}: ${reason}`);
  }
}

/** A file's text (`-`: standard input). */
export const readText = (file: string, flag: string): string => readable(file, flag, (f) => fs.readFileSync(f === '-' ? 0 : f, 'utf8'));

/** A file that must exist (streamed later): its size. */
export const fileSize = (file: string, flag: string): number =>
  readable(file, flag, (f) => {
    const st = fs.statSync(f);
    if (!st.isFile()) throw new Error('Not a file.');
    return st.size;
  });

/** A JSON file, parsed. */
export const readJson = (file: string, flag: string): unknown => parseJson(readText(file, flag), flag);

/** `--data JSON` or `--file F.json` (exactly one). */
export function jsonInput(data: string | undefined, file: string | undefined): unknown {
  if (data !== undefined && file !== undefined) throw new DomainError('BAD_REQUEST', 'Give either --data or --file, not both.');
  if (data !== undefined) return parseJson(data, 'data');
  if (file !== undefined) return readJson(file, 'file');
  throw new DomainError('BAD_REQUEST', 'Give the records: --data JSON or --file F.json.');
}

/** The table name a schema file stands for: its basename up to the first dot (`events.jsonb.json` → events). */
export const tableNameOf = (file: string): string => path.basename(file).replace(/\.json$/i, '').split('.')[0]!;

/** A field's value as a table cell: objects and arrays as JSON. */
export const show = (v: unknown): Cell => (v !== null && typeof v === 'object' ? JSON.stringify(v) : (v as Cell));

/** Records as a table: one column per field, as they first appear (the API gives records in schema order). */
export function recordsTable(rows: RecordRow[]): string {
  return table(rows, [...new Set(rows.flatMap((r) => Object.keys(r)))].map((k) => ({ header: k, get: (r: RecordRow) => show(r[k]) })));
}

/** One record as `key: value` lines (objects as JSON, booleans as true/false). */
export const recordLines = (row: RecordRow): string => keyValues(Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === 'boolean' ? String(v) : v])));

export const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** A page of records or edges as a table, with a footer saying how many there are and how to see more. */
export function pageLines(text: string, shown: number, { total, page, page_size }: { total: number; page: number; page_size: number }, noun: string): string {
  let footer = plural(total, noun);
  if (shown < total) footer += `, ${shown} shown (page ${page}, ${page_size} a page)`;
  if (page * page_size < total) footer += ` (next: --page ${page + 1})`;
  return shown ? `${text}\n\n${footer}` : footer;
}

/** A size as people read it: 512 B, 3.2 kB, 14.0 MB. */
export function bytes(n: number): string {
  if (n < 1000) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  return n < 1e9 ? `${(n / 1e6).toFixed(1)} MB` : `${(n / 1e9).toFixed(1)} GB`;
}

/** A pass-through stream that shows each chunk to `see` (progress, counts) on its way. */
/** A progress line of an upload: `  1.2 MB of 3.4 MB sent (35%)…` (with `what` in front when given). */
export const sentLine = (sent: number, total: number, what = ''): string => `  ${what ? `${what}: ` : ''}${bytes(sent)} of ${bytes(total)} sent (${total ? Math.floor((sent / total) * 100) : 100}%)…`;

export const watch = (see: (chunk: Buffer) => void): Transform =>
  new Transform({
    transform(chunk: Buffer, _enc, done) {
      see(chunk);
      done(null, chunk);
    },
  });

/** A download written to `output` through `<output>.part-<pid>`, renamed once whole and `check`ed (removed otherwise); or, for null, to stdout. */
export async function save(source: Readable, tap: Transform, output: string | null, check = () => {}): Promise<void> {
  const tmp = output === null ? null : `${output}.part-${process.pid}`;
  try {
    await pipeline(source, tap, tmp === null ? process.stdout : fs.createWriteStream(tmp), { end: tmp !== null });
    check();
    if (tmp !== null) fs.renameSync(tmp, output!);
  } catch (err) {
    if (tmp !== null) fs.rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Progress of a long transfer: `write`s at most one line a second (none for a transfer that
 * takes less), so short runs print only their first and last lines.
 */
export function progress(write: (line: string) => void): (line: () => string) => void {
  let last = Date.now();
  return (line) => {
    if (Date.now() - last < 1000) return;
    last = Date.now();
    write(line());
  };
}

/** Counts CSV rows (newlines outside quotes; CRLF once) of a stream as it passes. */
export class CsvRowCounter {
  rows = 0;
  bytes = 0;
  private quoted = false;
  private last = -1;

  /** Rows after the header line (a last line without a newline counts). */
  get records(): number {
    return Math.max(0, this.rows + (this.last !== -1 && this.last !== 0x0a && this.last !== 0x0d ? 1 : 0) - 1);
  }

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    for (const c of chunk) {
      if (c === 0x22) this.quoted = !this.quoted; // a doubled quote toggles twice
      else if (!this.quoted && (c === 0x0d || (c === 0x0a && this.last !== 0x0d))) this.rows++;
      this.last = c;
    }
  }
}
