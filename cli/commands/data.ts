// `platform data …`: the records of a data table (/api/apps/{app}/datatables/{table}/data/…).
import fs from 'node:fs';
import path from 'node:path';
import { pipeline as pipe, type Readable } from 'node:stream';
import { Args, Errors, Flags } from '@oclif/core';
import { messageBody, type MessageBody } from '../../shared/common/envelopes.ts';
import { delimiterName } from '../../shared/data/csv-text.ts';
import type { CsvImportReport } from '../../shared/data/records.schemas.ts';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { path as apiPath, type Api, type ApiRequest } from '../api.ts';
import { api, ApiCommand, operation } from '../base.ts';
import { asksHierarchy, hierarchyFlags, hierarchyLines, hierarchyQuery } from '../hierarchy.ts';
import { appFlag, bytes, CsvRowCounter, fileSize, filterFlag, jsonInput, jsonObject, pageLines, plural, progress, recordLines, recordQuery, recordsTable, save, sentLine, siteFlag, sortFlag, tableFlag, watch, type RecordRow } from '../tables.ts';

const tableFlags = { site: siteFlag, app: appFlag, table: tableFlag };
type TableFlags = { site: string; app: string; table: string };
const records = (f: TableFlags, rest = '') => apiPath`/api/apps/${f.app}/datatables/${f.table}/data/` + rest;
const at = { name: 'table' };
const populate = Flags.string({ summary: 'Related records to include: a,b or *.' });
const jsonFlags = (data: string, file: string) => ({ ...tableFlags, data: Flags.string({ summary: data, exclusive: ['file'] }), file: Flags.string({ summary: file }) });
type Written = { data: RecordRow | RecordRow[] };

/** The failing rows of a report, one line per row and field; a last line when more failed than are listed. */
function rowLines(r: CsvImportReport): string[] {
  const lines = r.errors.flatMap((e) => Object.entries(e.errors ?? {}).map(([field, messages]) => `  row ${e.row}: ${field}: ${(messages ?? []).join(' ')}`));
  const more = r.failed - r.errors.length;
  return more > 0 ? [...lines, `  … and ${plural(more, 'more failing row')} (the first ${r.errors.length} are listed).`] : lines;
}

/** The report as lines: the counts (and how the file was read, when not UTF-8 with commas), then one line per failing row and field. */
export function reportLines(r: CsvImportReport): string[] {
  const head = r.dry_run
    ? `Dry run: ${plural(r.total_rows, 'row')} checked, ${r.total_rows - r.failed} valid, ${r.failed} invalid; nothing was stored.`
    : r.failed
      ? `${r.failed} of ${plural(r.total_rows, 'row')} failed; nothing was imported.`
      : `Imported ${plural(r.created, 'record')} of ${plural(r.total_rows, 'row')}; ${r.failed} failed.`;
  const read = r.delimiter !== ',' || r.encoding !== 'utf-8' ? ` Read as ${r.encoding}, delimiter ${delimiterName(r.delimiter)}.` : '';
  return [head + read, ...rowLines(r)];
}

/** The report a failing import answers with (400, the report as `data`), if `err` is that answer. */
function failedReport(err: unknown): CsvImportReport | undefined {
  const data = err instanceof DomainError ? (err.data as Partial<CsvImportReport> | undefined) : undefined;
  return data && typeof data.failed === 'number' && Array.isArray(data.errors) ? (data as CsvImportReport) : undefined;
}

type ImportQuery = { dry_run?: string; mapping?: string; delimiter?: string; encoding?: string };

/** The request streaming `file` to the table's CSV import (POST …/data/import/), reporting how much of it was sent. */
const upload = (f: TableFlags, file: string, onSent: (n: number) => void, query: ImportQuery): ApiRequest => {
  const open = (): Readable => {
    let sent = 0;
    const tap = watch((chunk) => onSent((sent += chunk.length)));
    pipe(fs.createReadStream(file), tap, () => undefined); // a read error fails `tap`, hence the upload
    return tap;
  };
  return { method: 'POST', site: f.site, path: records(f, 'import/'), query, upload: { open, contentType: 'text/csv' } };
};

/** Imports `file`: the report, also when rows failed (the API's 400 carries it). */
export async function importCsv(api: Api, f: TableFlags, file: string, onSent: (n: number) => void, query: ImportQuery = {}): Promise<CsvImportReport> {
  try {
    return await api.call<CsvImportReport>(upload(f, file, onSent, query));
  } catch (err) {
    const report = failedReport(err);
    if (report) return report;
    throw err;
  }
}

class DataDeleteCommand extends ApiCommand<typeof DataDeleteCommand> {
  static override summary = 'Delete a record by key, records by --ids, or the records matching --filter-json.';
  static override description = 'With an ID, --json prints {status, message} (the API answers 204); with --ids, {deleted, ids}; with --filter-json, {deleted}. An empty filter is refused.';
  static override examples = ['<%= config.bin %> data delete 7 --table contacts --site shop_prod --app crm', `<%= config.bin %> data delete --filter-json '{"status":"inactive"}' --table contacts --site shop_prod --app crm`];
  static override args = { id: Args.string({ description: 'The primary key value' }) };
  static override flags = {
    ...tableFlags,
    ids: Flags.string({ summary: 'Primary key values: a,b,c.', exclusive: ['filter-json'] }),
    'filter-json': Flags.string({ summary: 'The conditions as a JSON object: {"age__gte":30}.' }),
  };

  async run(): Promise<MessageBody | { deleted: number; ids?: unknown[] }> {
    const { flags: f, args } = this;
    if ([args.id, f.ids, f['filter-json']].filter((v) => v !== undefined).length !== 1) throw new DomainError('BAD_REQUEST', 'Give exactly one of: an ID, --ids a,b or --filter-json JSON.');
    if (args.id !== undefined) {
      await this.call({ method: 'DELETE', site: f.site, path: records(f, apiPath`${args.id}/`) });
      this.log(`Record ${args.id} deleted.`);
      return messageBody(`Record ${args.id} deleted.`);
    }
    const query = f.ids !== undefined ? { ids: f.ids } : { filter: JSON.stringify(jsonObject(f['filter-json']!, 'filter-json')) };
    const body = await this.call<{ deleted: number; ids?: unknown[] }>({ method: 'DELETE', site: f.site, path: records(f), query });
    this.log(`Deleted ${plural(body.deleted, 'record')}.`);
    return body;
  }
}

class DataExportCommand extends ApiCommand<typeof DataExportCommand> {
  static override summary = 'Export the records of a data table as CSV (to a file, or to stdout).';
  static override description = 'The CSV is streamed from the API to the output as it comes (any size). Progress goes to stderr. With --json (which needs --output), prints {table, output, records, bytes}.';
  static override examples = ['<%= config.bin %> data export --table contacts --output contacts.csv --site shop_prod --app crm'];
  static override flags = { ...tableFlags, filter: filterFlag, sort: sortFlag, output: Flags.string({ char: 'o', summary: 'The CSV file to write (default: stdout).' }) };

  async run(): Promise<{ table: string; output: string | null; records: number; bytes: number }> {
    const f = this.flags;
    if (this.jsonEnabled() && f.output === undefined) throw new DomainError('BAD_REQUEST', '--json needs --output (the CSV would share stdout with the JSON).');
    const res = await (await this.api()).receive({ method: 'GET', site: f.site, path: records(f), query: { ...recordQuery(f.filter, { _sort: f.sort }), format: 'csv' } }, 'text/csv');
    const counter = new CsvRowCounter();
    const tick = progress((line) => this.info(line));
    const where = f.output ?? 'stdout';
    this.info(`Exporting ${f.table} to ${where}…`);
    const tap = watch((chunk) => {
      counter.push(chunk);
      tick(() => `  ${plural(counter.records, 'record')} (${bytes(counter.bytes)})…`);
    });
    await save(res.stream(), tap, f.output ?? null);
    const done = `Exported ${plural(counter.records, 'record')} (${bytes(counter.bytes)}) from ${f.table} to ${where}.`;
    if (f.output === undefined) this.info(done);
    else this.log(done);
    return { table: f.table, output: f.output ?? null, records: counter.records, bytes: counter.bytes };
  }
}

class DataImportCommand extends ApiCommand<typeof DataImportCommand> {
  static override summary = 'Import records from a CSV file (header row: field names).';
  static override description =
    'The file is streamed to the API; progress goes to stderr. All or nothing: when a row fails, nothing is stored and every failing row is listed (one line per row and field, on stderr after the error), exit code 1 (--json: the error body, the report under `data`). A dry run prints the report, exit code 1 when a row failed. Without --delimiter, the header line decides among `,` `;` and tab; without --encoding the file is read as UTF-8.';
  static override examples = [
    `<%= config.bin %> data import --table contacts --file people.csv --mapping '{"E-mail":"email"}' --dry-run --site shop_prod --app crm`,
    '<%= config.bin %> data import --table contacts --file export.csv --delimiter ";" --encoding latin1 --site shop_prod --app crm',
  ];
  static override flags = {
    ...tableFlags,
    file: Flags.string({ summary: 'The CSV file.', required: true }),
    mapping: Flags.string({ summary: 'CSV header → field, as a JSON object ({"E-mail":"email"}).' }),
    'dry-run': Flags.boolean({ summary: 'Check every row, store nothing.' }),
    delimiter: Flags.string({ summary: 'The cells\' separator: one character, or "tab" (default: sniffed from the header line among , ; and tab).' }),
    encoding: Flags.string({ summary: 'The file\'s encoding: utf-8 (default), latin1 (windows-1252), utf-16le or another WHATWG label.' }),
  };

  async run(): Promise<CsvImportReport> {
    const f = this.flags;
    const size = fileSize(f.file, 'file');
    const mapping = f.mapping === undefined ? undefined : jsonObject(f.mapping, 'mapping');
    for (const [header, field] of Object.entries(mapping ?? {})) if (typeof field !== 'string') throw fieldError('mapping', `The field for "${header}" must be a string.`);
    const tick = progress((line) => this.info(line));
    this.info(`${f['dry-run'] ? 'Checking' : 'Importing'} ${path.basename(f.file)} (${bytes(size)}) into ${f.table}…`);
    const onSent = (n: number) => tick(() => sentLine(n, size));
    const query = { dry_run: f['dry-run'] ? 'true' : 'false', mapping: mapping && JSON.stringify(mapping), delimiter: f.delimiter, encoding: f.encoding };
    const report = await this.call<CsvImportReport>(upload(f, f.file, onSent, query));
    if (report.failed > 0) process.exitCode = 1; // a dry run's failing rows; with --json too
    for (const line of reportLines(report)) this.log(line);
    return report;
  }

  /** A failing import: the error line, then its failing rows (stderr); --json prints the body as it is. */
  protected override async catch(err: Errors.CLIError & { oclif?: { exit?: number } }): Promise<unknown> {
    const out = await super.catch(err);
    const report = failedReport(err);
    if (report && !this.jsonEnabled()) for (const line of rowLines(report)) this.info(line);
    return out;
  }
}

/** One Server-Sent Event. */
interface StreamEvent {
  id?: string;
  event: string;
  data: Record<string, unknown>;
}

/** The events of a `text/event-stream` body as they arrive (comments and bare `id:` lines move `lastId` only). */
async function* sseEvents(body: Readable, onId: (id: string) => void): AsyncGenerator<StreamEvent> {
  let buffer = '';
  for await (const chunk of body) {
    buffer += String(chunk);
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event: string | undefined;
      let data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) onId(line.slice(4));
        else if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      if (event) yield { event, data: data ? (JSON.parse(data) as Record<string, unknown>) : {} };
    }
  }
}

/** No byte for this long (the server sends a heartbeat every 15 s by default): the connection is taken as lost. */
const WATCH_IDLE_MS = 45_000;

class DataWatchCommand extends ApiCommand<typeof DataWatchCommand> {
  static override summary = 'Print the changes of a table\'s records as they happen (tail -f for a table).';
  static override description =
    'Follows GET …/data/changes/ (docs/realtime.md): one line per create, update, delete, enter or leave, as your read policy lets you see them. A dropped connection is resumed after the last event seen (Last-Event-ID), so nothing is missed or shown twice. --since resumes after an event id of an earlier run. Runs until Ctrl-C, or until --count events. With --json, one JSON object per line per event ({id, event, op, key, record, changed, at, actor}), then {table, events, last_event_id}. Remote mode: the platform server holds the streams.';
  static override examples = [
    '<%= config.bin %> data watch --table contacts --site shop_prod --app crm',
    '<%= config.bin %> data watch --table contacts --filter status=active --events create,update --json --site shop_prod --app crm',
  ];
  static override flags = {
    ...tableFlags,
    filter: filterFlag,
    events: Flags.string({ summary: 'The kinds of change: a comma list of create, update, delete (default: all).' }),
    select: Flags.string({ summary: 'The fields shown with each record: a,b (the key always).' }),
    since: Flags.string({ summary: 'Resume after this event id (an earlier run\'s last_event_id).' }),
    count: Flags.integer({ summary: 'Stop after this many events.', min: 1 }),
  };

  /** One line, as the events before it (the output is JSON lines). */
  protected override logJson(json: unknown): void {
    process.stdout.write(`${JSON.stringify(json)}\n`);
  }

  async run(): Promise<{ table: string; events: number; last_event_id: string | null }> {
    const f = this.flags;
    const client = await this.api();
    let last = f.since;
    let seen = 0;
    const done = () => ({ table: f.table, events: seen, last_event_id: last ?? null });
    for (let attempt = 0; ; attempt++) {
      const res = await client.receive(
        { method: 'GET', site: f.site, path: records(f, 'changes/'), query: recordQuery(f.filter, { events: f.events, select: f.select }), headers: last ? { 'Last-Event-ID': last } : undefined },
        'text/event-stream',
      );
      if (attempt === 0) this.info(`Watching ${f.table} (Ctrl-C to stop)…`);
      const body = res.stream();
      let idle = setTimeout(() => body.destroy(), WATCH_IDLE_MS);
      try {
        for await (const e of sseEvents(body, (id) => (last = id))) {
          clearTimeout(idle);
          idle = setTimeout(() => body.destroy(), WATCH_IDLE_MS);
          if (e.event === 'end') {
            const reason = String(e.data.reason);
            if (reason === 'credentials' || reason === 'access') throw new DomainError(reason === 'credentials' ? 'INVALID_TOKEN' : 'PERMISSION_DENIED', String(e.data.message));
            continue; // the server asks to reconnect: below
          }
          seen += e.event === 'reset' ? 0 : 1;
          if (this.jsonEnabled()) process.stdout.write(`${JSON.stringify({ id: last ?? null, event: e.event, ...e.data })}\n`);
          else this.log(watchLine(e, last));
          if (f.count !== undefined && seen >= f.count) return done();
        }
      } catch (err) {
        if (err instanceof DomainError) throw err;
      } finally {
        clearTimeout(idle);
        body.destroy();
      }
      this.info(`The stream ended; resuming${last ? ` after ${last}` : ''}…`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** An event as one line: `12 update 7 {"employees":11} (employees)`. */
function watchLine(e: StreamEvent, id: string | undefined): string {
  if (e.event === 'reset') return `reset: ${String(e.data.message)}`;
  const record = e.data.record === undefined ? '' : ` ${JSON.stringify(e.data.record)}`;
  const changed = Array.isArray(e.data.changed) ? ` (${e.data.changed.join(', ')})` : '';
  return `${id ?? '-'} ${e.event} ${JSON.stringify(e.data.key)}${record}${changed}`;
}

export const DATA_COMMANDS = {
  'data:list': api('records_list_by_app', {
    description: 'Each --filter is one condition of the query string (`age__gte=30`, `status__in=active,lead`); all must hold. Prints the API body {data, total, page, page_size} with --json.',
    examples: ["data list --table contacts --filter 'status=lead' --sort -id --site shop_prod --app crm", "data list --table orders --aggregate 'count,sum(unit_price)' --group-by status --site shop_prod --app crm"],
    rename: { ...at, _count: 'count' },
    flags: {
      filter: filterFlag,
      sort: sortFlag,
      page: Flags.string({ summary: 'Page number (default 1).' }),
      'page-size': Flags.string({ summary: 'Records per page (default 20, at most 1000).' }),
      populate,
      search: Flags.string({ summary: 'Full-text search keywords.' }),
      aggregate: Flags.string({ summary: "Aggregates instead of records: 'count,sum(price)'." }),
      'group-by': Flags.string({ summary: 'Group the aggregates by this field.' }),
      ...hierarchyFlags,
    },
    query: ({ flags: f }) => ({
      ...recordQuery(f.filter, { _sort: f.sort, page: f.page, page_size: f['page-size'], populate: f.populate, search: f.search, _aggregate: f.aggregate, _group_by: f['group-by'] }),
      ...hierarchyQuery(f),
    }),
    render: (body: { data: RecordRow[]; total: number; page: number; page_size: number }, { flags }) => {
      if (asksHierarchy(flags)) return hierarchyLines(body, flags.format);
      if (!Array.isArray(body.data) || typeof body.total !== 'number') return JSON.stringify(body, null, 2); // aggregates: the API's own shape
      return pageLines(recordsTable(body.data), body.data.length, body, 'record');
    },
  }),
  'data:get': api('records_retrieve_by_app', {
    args: ['pk'],
    rename: at,
    examples: ['data get 7 --table contacts --populate company_id --site shop_prod --app crm', 'data get 7 --table employees --include descendants --relationship-type reports_to --site shop_prod --app hr'],
    flags: { populate, ...hierarchyFlags },
    query: ({ flags: f }) => ({ populate: f.populate, ...hierarchyQuery(f) }),
    render: (body: { data: RecordRow }, { flags }) => (asksHierarchy(flags) ? hierarchyLines(body, flags.format) : recordLines(body.data)),
  }),
  'data:create': operation({
    summary: 'Create a record, or many (a JSON array: all or nothing).',
    examples: [`data create --table contacts --data '{"id":100,"first_name":"Ada","email":"ada@example.com"}' --site shop_prod --app crm`, 'data create --table contacts --file new-contacts.json --site shop_prod --app crm'],
    flags: jsonFlags('The record (a JSON object) or records (a JSON array).', 'A JSON file holding the record or the array of records.'),
    request: ({ flags: f }) => ({ method: 'POST', site: f.site, path: records(f), body: jsonInput(f.data, f.file) }),
    render: (body: Written) => (Array.isArray(body.data) ? `Created ${plural(body.data.length, 'record')}.` : ['Record created.', recordLines(body.data)]),
  }),
  'data:update': operation({
    summary: 'Change some fields of a record (PATCH), or of many records.',
    description: 'With an ID: --data is an object of the fields to change. Without: a JSON array (--data or --file) of objects, each carrying its primary key, all changed in one request.',
    examples: [`data update 7 --table contacts --data '{"status":"inactive"}' --site shop_prod --app crm`, 'data update --table contacts --file changes.json --site shop_prod --app crm'],
    args: { id: Args.string({ description: 'The primary key value (omit for an array of records)' }) },
    flags: jsonFlags('The fields to change (a JSON object), or an array of records with their keys.', 'A JSON file holding the object or the array.'),
    request: ({ flags: f, args }) => {
      const body = jsonInput(f.data, f.file);
      const flag = f.data !== undefined ? 'data' : 'file';
      if (args.id !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body))) throw fieldError(flag, 'Expected a JSON object of the fields to change.');
      if (args.id === undefined && !Array.isArray(body)) throw fieldError(flag, 'Without an ID, expected a JSON array of records, each with its primary key.');
      return { method: 'PATCH', site: f.site, path: records(f, args.id === undefined ? '' : apiPath`${args.id}/`), body };
    },
    render: (body: Written) => (Array.isArray(body.data) ? `Updated ${plural(body.data.length, 'record')}.` : recordLines(body.data)),
  }),
  'data:upsert': operation({
    summary: 'Create a record, or update the one with the same values of --unique-fields.',
    examples: [`data upsert --table contacts --unique-fields email --data '{"id":7,"first_name":"Ada","email":"ada@example.com"}' --site shop_prod --app crm`],
    flags: { ...jsonFlags('The record (a JSON object).', 'A JSON file holding the record.'), 'unique-fields': Flags.string({ summary: 'The fields that identify the record: a,b.', required: true }) },
    request: ({ flags: f }) => ({ method: 'POST', site: f.site, path: records(f, 'upsert/'), query: { unique_fields: f['unique-fields'] }, body: jsonInput(f.data, f.file) }),
    render: (body: { data: RecordRow; created: boolean }) => [body.created ? 'Record created.' : 'Record updated.', recordLines(body.data)],
  }),
  'data:import': DataImportCommand,
  'data:delete': DataDeleteCommand,
  'data:export': DataExportCommand,
  'data:watch': DataWatchCommand,
};
