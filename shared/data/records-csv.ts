// CSV export and import of a data table's records (docs/data-tables.md "CSV export and import").
// Export: the list's conditions, search and sort over every matching record, streamed from a
// server-side cursor (MikroORM's connection stream: pg-cursor on a pooled connection of its
// own) through fast-csv, one batch at a time and only as fast as the reader takes it.
// Import: the body is spooled to a temporary file first (common/spool.ts: a slow client holds no
// connection while it sends), checked or decoded from its encoding with its delimiter given or
// sniffed (csv-text.ts), then fast-csv rows mapped to fields by the header (and an optional
// mapping), coerced to the schema's types, validated like the records API's bulk create, inserted
// in batches inside one transaction; all or nothing. Every problem of every row is reported in
// one run: once one row fails, nothing more is inserted and the remaining rows are checked
// against the database set-based (records/import-checks.ts).
// Identifiers come only from the stored schema (target.ts); every value is bound. Both are long
// operations (db/long-operations.ts): a slot of the site each, while they hold a connection.
import { Readable, Transform } from 'node:stream';
import type { parse as Parse } from 'fast-csv';
import type { EntityManager } from '@mikro-orm/postgresql';
import { spool } from '../common/spool.ts';
import type { ServiceContext } from '../context.ts';
import { longOperation, longTransaction } from '../db/long-operations.ts';
import { attribute } from '../realtime/actor.ts';
import { DomainError, fieldError, type FieldErrors } from '../errors.ts';
import { csvText, delimiterName, delimiterOption, encodingOption } from './csv-text.ts';
import type { TableScope } from './datatable.service.ts';
import { cellReader, missingValuesOf, toStored, type Cast } from './field-types.ts';
import type { SqlFragment } from './query/filter.ts';
import { requireAllowed } from './records/access.ts';
import { listQuery, plain } from './records/read.ts';
import { openTarget, type RecordRow, type Target } from './records/target.ts';
import type { CsvImportReport } from './records.schemas.ts';
import { importChecks, type ImportRow } from './records/import-checks.ts';
import { failingRecord, insertRecords, recordErrors, violation } from './records/write.ts';

/** Rows fetched per cursor read of an export. */
export const EXPORT_BATCH = 2000;
/** Rows per insert statement of an import. */
export const IMPORT_BATCH = 5000;
/** Data rows of one import, at most. */
export const MAX_IMPORT_ROWS = 1_000_000;
/** Bytes of one import's CSV, at most. */
export const MAX_IMPORT_BYTES = 256 * 1024 * 1024;
/** Failing rows listed in a report (`failed` still counts them all). */
export const MAX_REPORTED_ERRORS = 100;

export interface CsvImportOptions {
  /** CSV header → field; headers that are field names map to themselves. */
  mapping?: Record<string, string>;
  /** Validate and insert in a transaction that is rolled back: nothing is written. */
  dry_run?: boolean;
  /** The cells' separator; sniffed from the header line when absent (csv-text.ts). */
  delimiter?: string;
  /** The file's encoding (a WHATWG label); UTF-8 when absent (UTF-16 with its byte-order mark). */
  encoding?: string;
  /** The body size the request declares (Content-Length): refused at once beyond the byte limit. */
  declaredBytes?: number;
  /** Lower limits than MAX_IMPORT_ROWS / MAX_IMPORT_BYTES (tests, callers with their own caps). */
  maxRows?: number;
  maxBytes?: number;
}

// --- export ----------------------------------------------------------------------------------

/** A value as a CSV cell: null → empty, objects and arrays → JSON, the rest as text. */
function cell(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/**
 * Every record the list would give for `query` (conditions, search, sort; no pages) as a CSV
 * stream: the header is the table's fields in schema order (`id` first where the table has a
 * generated key; docstore: `id` and the schema's fields, extra document fields are not
 * exported). The first batch is read before returning, so a failing query is still an
 * ordinary error; afterwards rows are fetched only as the stream is read, and the cursor's
 * connection is released when the stream ends, fails or is destroyed (client gone).
 */
export async function exportCsv(ctx: ServiceContext, scope: TableScope, name: string, query: Record<string, unknown>): Promise<Readable> {
  const t = await openTarget(ctx, scope, name, 'read');
  if (query._aggregate !== undefined || query._group_by !== undefined) throw fieldError('format', 'format=csv exports records; it does not apply to _aggregate/_group_by.');
  if (query.populate !== undefined) throw fieldError('populate', 'populate does not apply to format=csv.');
  const { where, orderBy } = await listQuery(ctx.em, t, query);
  // The cursor's connection is held while the reader reads: a slot of the site, given back when the stream closes.
  const release = await longOperation(ctx);
  try {
    const out = await cursorCsv(ctx, t, where, orderBy);
    out.once('close', release);
    return out;
  } catch (err) {
    release();
    throw err;
  }
}

async function cursorCsv(ctx: ServiceContext, t: Target, where: SqlFragment, orderBy: string): Promise<Readable> {
  const { format } = await import('fast-csv'); // loaded by the first CSV, not with the app
  const header = [...t.columns.keys()];
  const sql = `SELECT ${t.recordSql('t')} AS r FROM ${t.table} t WHERE ${where.sql} ORDER BY ${orderBy}`;
  const cursor = ctx.em.getConnection().stream<{ r: RecordRow }>(sql, where.params, ctx.em.getTransactionContext(), undefined, EXPORT_BATCH);
  const toCells = (r: RecordRow) => {
    const rec = plain(t, r);
    return header.map((f) => cell(rec[f]));
  };
  let first: IteratorResult<{ r: RecordRow }>;
  try {
    first = await cursor.next();
  } catch (err) {
    throw violation(t, err) ?? err;
  }
  let pending: IteratorResult<{ r: RecordRow }> | undefined = first;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await cursor.return?.(undefined);
  };
  // A reader that takes nothing for stallMs is cut off: its cursor's connection and its slot go back.
  const stallMs = ctx.longOperations?.limits.stallMs ?? 0;
  /** Since when the last row pushed waits for the reader to ask for more. */
  let waitingSince: number | undefined;
  const watch = stallMs ? setInterval(() => {
    if (waitingSince !== undefined && Date.now() - waitingSince > stallMs) rowsOut.destroy(new Error(`The reader took nothing for ${stallMs} ms.`));
  }, Math.min(stallMs, 1000)).unref() : undefined;
  const rowsOut = new Readable({
    objectMode: true,
    highWaterMark: 64,
    read() {
      waitingSince = undefined;
      const step = pending ? Promise.resolve(pending) : cursor.next();
      pending = undefined;
      step.then(
        (res) => {
          if (this.destroyed) return;
          waitingSince = Date.now();
          if (res.done) {
            closed = true;
            this.push(null);
          } else this.push(toCells(res.value.r));
        },
        (err: unknown) => this.destroy(err as Error),
      );
    },
    destroy(err, cb) {
      clearInterval(watch);
      // Waits for a read in flight, then closes the cursor and releases its connection.
      close().then(() => cb(err), (e: unknown) => cb(err ?? (e as Error)));
    },
  });
  const csv = format<string[], string[]>({ headers: header, includeEndRowDelimiter: true });
  const out = chunked();
  rowsOut.on('error', (err) => out.destroy(err));
  csv.on('error', (err) => out.destroy(err));
  // Client gone (Koa destroys the body) or formatting failed: stop reading, release the cursor.
  out.on('close', () => {
    csv.destroy();
    rowsOut.destroy();
  });
  rowsOut.pipe(csv).pipe(out);
  return out;
}

/** fast-csv writes a chunk per row: gathered into ~64 KiB chunks for the socket. */
function chunked(size = 64 * 1024): Transform {
  let parts: Buffer[] = [];
  let length = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      parts.push(chunk);
      length += chunk.length;
      if (length < size) return cb();
      const whole = Buffer.concat(parts, length);
      parts = [];
      length = 0;
      cb(null, whole);
    },
    flush(cb) {
      cb(null, length ? Buffer.concat(parts, length) : undefined);
    },
  });
}

// --- import ----------------------------------------------------------------------------------

/** `dry_run`, `mapping`, `delimiter` and `encoding` from a query string (`mapping` a JSON object of header → field). */
export function csvImportOptions(query: Record<string, unknown>): CsvImportOptions {
  const out: CsvImportOptions = {};
  const given = (name: string): string | undefined => {
    const v = query[name];
    if (v === undefined || v === '') return undefined;
    if (typeof v !== 'string') throw fieldError(name, 'Expected one value.');
    return v;
  };
  const dry = given('dry_run');
  if (dry !== undefined) {
    if (dry === 'true' || dry === '1') out.dry_run = true;
    else if (dry === 'false' || dry === '0') out.dry_run = false;
    else throw fieldError('dry_run', 'Expected true or false.');
  }
  const mapping = given('mapping');
  if (mapping !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(mapping);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || !Object.values(parsed).every((v) => typeof v === 'string')) {
      throw fieldError('mapping', 'Expected a JSON object of CSV header → field name, e.g. {"Company":"name"}.');
    }
    out.mapping = parsed as Record<string, string>;
  }
  const delimiter = given('delimiter');
  if (delimiter !== undefined) out.delimiter = delimiterOption(delimiter);
  const encoding = given('encoding');
  if (encoding !== undefined) out.encoding = encodingOption(encoding);
  return out;
}

/** CSV text → the field's logical value (field-types.ts: Frictionless lexical forms and options). */
function coercerFor(t: Target, field: string): (text: string) => Cast {
  const f = t.schema.fields.find((x) => x.name === field);
  // The cell as text, cast with the record (recordErrors) as a JSON string is; the generated key
  // (not a schema field): a UUID, checked by the validation.
  return f ? cellReader(f, missingValuesOf(t.schema)) : (text) => ({ value: text });
}

/** Column index → field, checked before anything is read further: unknown headers or mapping entries → 400. */
function headerFields(t: Target, header: string[], mapping: Record<string, string>, delimiter: string): string[] {
  const fields = new Set(t.columns.keys());
  const errors: FieldErrors = {};
  const present = new Set(header);
  const badTargets = Object.entries(mapping).filter(([, f]) => !fields.has(f));
  const badSources = Object.keys(mapping).filter((h) => !present.has(h));
  if (badTargets.length || badSources.length) {
    errors.mapping = [
      ...badTargets.map(([h, f]) => `"${h}" maps to unknown field "${f}".`),
      ...badSources.map((h) => `"${h}" is not a column of the CSV header.`),
    ];
  }
  const out = header.map((h) => (Object.hasOwn(mapping, h) ? mapping[h]! : fields.has(h) ? h : ''));
  const unknown = header.filter((_, i) => out[i] === '');
  if (unknown.length) {
    // A column that holds another delimiter: the file likely uses that one.
    const split = unknown.some((h) => /[,;\t|]/.test(h)) ? ` The header was read with the delimiter ${delimiterName(delimiter)}; give delimiter= if the file uses another.` : '';
    errors.header = [
      `Unknown column${unknown.length > 1 ? 's' : ''} ${unknown.map((h) => JSON.stringify(h)).join(', ')}: not fields of "${t.name}" (fields: ${[...fields].join(', ')}); map them with mapping={"column":"field"}.${split}`,
    ];
  }
  const seen = new Map<string, number>();
  for (const f of out) if (f) seen.set(f, (seen.get(f) ?? 0) + 1);
  const twice = [...seen].filter(([, n]) => n > 1).map(([f]) => f);
  if (twice.length) (errors.header ??= []).push(`Several columns give field${twice.length > 1 ? 's' : ''} ${twice.map((f) => `"${f}"`).join(', ')}.`);
  if (Object.keys(errors).length) throw new DomainError('VALIDATION_ERROR', 'The CSV header does not match the table: nothing was imported.', { errors });
  return out;
}

const tooLarge = (what: string) => new DomainError('PAYLOAD_TOO_LARGE', `CSV import too large: ${what}.`, { detail: 'Request body is too large.' });
const ROLLBACK = Symbol('rollback');

/** A failing row: counted, and listed while the report has room. */
function reject(report: CsvImportReport, row: number, errors: FieldErrors): void {
  report.failed++;
  if (report.errors.length < MAX_REPORTED_ERRORS) report.errors.push({ row, errors });
}

/**
 * The CSV's data rows, checked one at a time: parsed by fast-csv, the header matched to the
 * table's fields (400 before any row is read), each row coerced to the field types and validated
 * like a bulk create's records. `next()` gives the row with its record and its errors (then the
 * record holds only the fields without one), undefined at the end of the CSV. `close()` stops reading.
 */
function csvRowSource(parse: typeof Parse, t: Target, input: Readable, delimiter: string, limits: { maxRows: number }, report: CsvImportReport) {
  const parser = parse<string[], string[]>({ headers: false, ignoreEmpty: true, delimiter });
  const fail = (err: Error) => parser.destroy(err);
  input.on('error', fail);
  input.pipe(parser);
  const iterator = parser[Symbol.asyncIterator]() as AsyncIterator<string[]>;
  const read = async (): Promise<IteratorResult<string[]>> => {
    try {
      return await iterator.next();
    } catch (err) {
      // fast-csv's own errors ("Parse Error: missing closing '"'…") are the client's: 400.
      if (err instanceof Error && err.message.startsWith('Parse Error')) throw new DomainError('BAD_REQUEST', `Malformed CSV after data row ${report.total_rows}: ${err.message}`);
      throw err;
    }
  };
  let fields: string[] = [];
  let coerce: ((text: string) => Cast)[] = [];

  return {
    /** Reads the header row: column index → field (400 when the columns do not match the table). */
    async header(mapping?: Record<string, string>): Promise<void> {
      const head = await read();
      if (head.done) throw fieldError('header', 'The CSV is empty: expected a header row of field names.');
      const names = head.value.map((h, i) => (i === 0 ? h.replace(/^\uFEFF/, '') : h).trim());
      fields = headerFields(t, names, mapping ?? {}, delimiter);
      coerce = fields.map((f) => coercerFor(t, f));
    },

    /** Reads, coerces and validates one row. */
    async next(): Promise<ImportRow | undefined> {
      const next = await read();
      if (next.done) return undefined;
      const row = ++report.total_rows;
      if (row > limits.maxRows) throw tooLarge(`more than ${limits.maxRows} rows`);
      const cells = next.value;
      if (cells.length !== fields.length) return { row, errors: { non_field_errors: [`Expected ${fields.length} cells (one per header column), got ${cells.length}.`] } };
      const rec: RecordRow = {};
      const bad: FieldErrors = {};
      cells.forEach((text, i) => {
        if (text === '') return; // empty cell: field left out (its default applies)
        const out = coerce[i]!(text);
        if ('error' in out) bad[fields[i]!] = [out.error];
        else rec[fields[i]!] = out.value;
      });
      const errors: FieldErrors = {};
      recordErrors(t, rec, '', errors);
      Object.assign(errors, bad);
      if (!Object.keys(errors).length) return { row, rec };
      // The fields that passed stay, in their stored form, for the database checks.
      for (const f of Object.keys(errors)) delete rec[f];
      toStored(t.schema.fields, rec);
      return { row, rec, errors };
    },

    close(): void {
      input.unpipe(parser);
      input.off('error', fail);
      input.destroy();
      parser.destroy();
    },
  };
}

/** Inserts a batch of valid rows in a savepoint of the import's transaction; false (the savepoint rolled back) on a constraint violation. */
async function writeBatch(tx: EntityManager, t: Target, batch: ImportRow[], report: CsvImportReport): Promise<boolean> {
  try {
    await tx.transactional((sp) => insertRecords(sp as EntityManager, t, batch.map((x) => x.rec!), 'nothing'));
    report.created += batch.length;
    return true;
  } catch (err) {
    if (!violation(t, err)) throw err;
    return false;
  }
}

/**
 * Imports a CSV stream into a table: all or nothing. The body is spooled whole first (413 as soon
 * as it passes the byte limit; the file is deleted afterwards), so that no connection waits on
 * the client. Then importRows. A report with failing rows is a 400 whose `data` is the report
 * (a dry run answers it as it is).
 */
export async function importCsv(ctx: ServiceContext, scope: TableScope, name: string, input: Readable, options: CsvImportOptions = {}): Promise<CsvImportReport> {
  const t = await openTarget(ctx, scope, name, 'create');
  const maxRows = Math.min(options.maxRows ?? MAX_IMPORT_ROWS, MAX_IMPORT_ROWS);
  const maxBytes = Math.min(options.maxBytes ?? MAX_IMPORT_BYTES, MAX_IMPORT_BYTES);
  if ((options.declaredBytes ?? 0) > maxBytes) throw tooLarge(`more than ${maxBytes} bytes`);
  const body = await spool(input, maxBytes, () => tooLarge(`more than ${maxBytes} bytes`));
  let report: CsvImportReport;
  try {
    report = await importRows(ctx, t, body.open(), maxRows, options);
  } finally {
    await body.remove();
  }
  if (report.failed && !report.dry_run) {
    const rows = `${report.failed} of ${report.total_rows} row${report.total_rows === 1 ? '' : 's'}`;
    throw new DomainError('VALIDATION_ERROR', `${rows} failed; nothing was imported.`, { data: report });
  }
  return report;
}

/**
 * The rows are read, coerced and validated one by one (csvRowSource), their keys compared with
 * the earlier rows' (importChecks' track), and taken IMPORT_BATCH at a time in one long
 * transaction. While every row is valid, each batch is inserted (writeBatch): the database checks
 * its keys and references. From the first failing row or rejected batch on, nothing more is
 * inserted: each batch left (the rejected one included) is checked set-based against the table
 * (importChecks' check: keys it holds, references to records it lacks, duplicates of unique
 * indexes on expressions or with conditions), so that one run reports every problem. Any
 * failure, or a dry run: the transaction is rolled back.
 */
async function importRows(ctx: ServiceContext, t: Target, input: Readable, maxRows: number, options: CsvImportOptions): Promise<CsvImportReport> {
  const { text, encoding, delimiter } = await csvText(input, options);
  const report: CsvImportReport = { dry_run: options.dry_run === true, delimiter, encoding, total_rows: 0, created: 0, failed: 0, errors: [] };
  const { parse } = await import('fast-csv'); // loaded by the first CSV, not with the app
  const source = csvRowSource(parse, t, text, delimiter, { maxRows }, report);
  try {
    await source.header(options.mapping);
    const checks = await importChecks(ctx.em, t);
    let done = false;
    const nextBatch = async (): Promise<ImportRow[]> => {
      const batch: ImportRow[] = [];
      while (batch.length < IMPORT_BATCH) {
        const item = await source.next();
        if (!item) {
          done = true;
          break;
        }
        checks.track(item);
        batch.push(item);
      }
      return batch;
    };
    /**
     * The batch's problems in the database, then its failing rows into the report. When the
     * database refused the batch (`rejected`) for nothing the checks see, or refused a check's
     * values, the rows without an error yet are replayed one by one to name the one at fault.
     */
    const settle = async (em: EntityManager, batch: ImportRow[], rejected: boolean) => {
      let checked = true;
      try {
        await em.transactional((sp) => checks.check(sp as EntityManager, batch));
      } catch (err) {
        if (!violation(t, err)) throw err;
        checked = false;
      }
      const valid = batch.filter((x) => x.rec && !x.errors);
      if (!checked || (rejected && valid.length === batch.length)) {
        const found = await failingRecord(em, t, valid.map((x) => x.rec!));
        const item = found ? valid[found.index] : rejected ? valid[0] : undefined;
        if (item) item.errors = (found && violation(t, found.error)?.errors) || { non_field_errors: ['The row violates a constraint of the table.'] };
      }
      for (const item of batch) if (item.errors) reject(report, item.row, item.errors);
    };

    let batch = await nextBatch();
    if (batch.length) {
      await longTransaction(ctx, async (em) => {
        await attribute(em, ctx);
        let writing = true;
        for (;;) {
          if (writing && batch.every((x) => !x.errors)) {
            await requireAllowed(ctx, t, 'create', batch.map((x) => x.rec!)); // one row the policies refuse refuses the import
            writing = await writeBatch(em, t, batch, report);
            if (!writing) await settle(em, batch, true);
          } else {
            writing = false;
            await settle(em, batch, false);
          }
          if (done) break;
          batch = await nextBatch();
        }
        if (report.failed || report.dry_run) throw ROLLBACK;
      }).catch((err: unknown) => {
        if (err !== ROLLBACK) throw err;
      });
    }
  } catch (err) {
    throw violation(t, err) ?? err;
  } finally {
    source.close();
  }
  if (report.failed) report.created = 0;
  return report;
}
