// Records of data tables of every provider (scope 'tenant'), spec Part 2 §4 "Data records": served
// under /api/apps/{app_slug}/datatables/{name}/data/ and with the data source segment
// /api/apps/{app_slug}/datasources/{ds}/datatables/{name}/data/. docs/data-tables.md.
import { Type } from '@sinclair/typebox';
import { MAX_IMPORT_BYTES, MAX_IMPORT_ROWS, MAX_REPORTED_ERRORS, csvImportOptions, exportCsv, importCsv } from '../../shared/data/records-csv.ts';
import * as records from '../../shared/data/records.service.ts';
import { RecordKeyParam } from '../../shared/data/datatable.schemas.ts';
import { CsvImportReport, RecordData, RecordPage, RecordsCreated, RecordsDeleted, RecordsPatched, RecordUpserted } from '../../shared/data/records.schemas.ts';
import type { RouteDef } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';
import { JsonText, jsonBody } from '../../shared/common/json-text.ts';
import { perTable, scopeOf } from './datatables.routes.ts';
import { HierarchyBody, type GraphSettings } from '../../shared/data/graph/hierarchy.ts';

const WHO_WRITE = 'Site administrators (superusers and staff of the site) only.';
const WHO_READ = 'Any user of the site.';
const FILTERS = 'Conditions `field=value` or `field__op=value` with op one of eq, ne, gt, gte, lt, lte, in, nin (comma lists), contains, icontains, startswith, istartswith, endswith, iendswith, isnull (true/false), between (low,high); all must hold. `field` may be `fk_field.related_field` (through a foreign key), `relation.field` (a reverse foreign key or a many-to-many relation, named by the other table), or a dotted document path on docstore tables.';
const READ = '`populate`: comma list of relations or `*` (a foreign key becomes the referenced record; reverse and many-to-many relations are arrays of records).';

const HIERARCHY = 'On a hierarchy table: `include` (descendants, ancestors, both), `depth`, `format` (include, tree, graph), `relationship_type` (repeatable) give the hierarchy forms of docs/hierarchy.md.';

const COUNT = `\`_count=exact|planned|none\` (or the header \`Prefer: count=exact|planned|none\`; the parameter wins): \`total\` is the exact count (default), the planner's estimate (no scan: large matches cost nothing to count), or null. A \`Prefer\` count that was applied is named in \`Preference-Applied\`.`;

/** The list's query: field conditions and the reserved parameters (described above); `_count` is checked here. */
const ListQuery = Type.Object(
  { _count: Type.Optional(Type.Unsafe<records.CountMode>({ type: 'string', enum: [...records.COUNT_MODES], description: 'How `total` is counted: exact (default), planned (the estimate), none (null).' })) },
  { additionalProperties: true },
);

/** The list's count mode: `_count` (checked by ListQuery), else `Prefer: count=…` (RFC 7240; other preferences are ignored), else exact. */
export function countMode(ctx: AppContext, query: Record<string, unknown>): records.CountMode {
  if (query._count !== undefined) return query._count as records.CountMode;
  for (const preference of ctx.get('Prefer').split(',')) {
    const [key, value] = preference.trim().split('=').map((x) => x.trim().toLowerCase());
    if (key === 'count' && records.COUNT_MODES.includes(value as records.CountMode)) {
      ctx.set('Preference-Applied', `count=${value}`);
      return value as records.CountMode;
    }
  }
  return 'exact';
}

/** A body that may hold PostgreSQL's JSON text (get and list): composed as text around it. */
function send(ctx: AppContext, body: Record<string, unknown>): void {
  if (!Object.values(body).some((v) => v instanceof JsonText)) {
    ctx.body = body;
    return;
  }
  ctx.type = 'application/json; charset=utf-8';
  // A large body is encoded once (a string would be scanned for its length, then encoded again
  // when written); a small one stays a string, which Node writes in one piece with the headers.
  const text = jsonBody(body);
  ctx.body = text.length > 65_536 ? Buffer.from(text) : text;
}

export function recordRoutes(graph: GraphSettings): RouteDef[] {
  return [
    ...perTable({
      method: 'get',
      suffix: 'data/',
      operationId: 'records_list',
      summary: 'List records',
      description: `${FILTERS} Pages: page/page_size (default 20, at most 1000) or limit/offset. \`_sort\`: comma list of fields (also \`fk_field.related_field\`), \`-\` for descending. \`search\`: keywords matched as word prefixes over the text fields (full-text index). ${READ} \`_aggregate\`: comma list of count, count_distinct(f), sum(f), avg(f), min(f), max(f), with optional \`_group_by=a,b\` → one row per group. \`format=csv\` streams every matching record (same conditions, search and sort; no pages) as \`text/csv\`, a header of the table's fields then one line per record. Answers {data, total, page, page_size}. ${COUNT} ${HIERARCHY} ${WHO_READ}`,
      query: ListQuery,
      responses: { 200: RecordPage },
      produces: { 200: 'text/csv' },
      async handler(ctx, { params, query }) {
        if (query.format === 'csv') {
          const csv = await exportCsv(ctx.state.service(), scopeOf(params), params.name!, query);
          ctx.attachment(`${params.name}.csv`);
          ctx.type = 'text/csv; charset=utf-8';
          ctx.body = csv;
          return;
        }
        const page = await records.listRecords(ctx.state.service(), scopeOf(params), params.name!, query, countMode(ctx, query), graph);
        send(ctx, page instanceof HierarchyBody ? page.body : page);
      },
    }, 'records'),
    ...perTable({
      method: 'post',
      suffix: 'data/',
      bodyLimit: 'data',
      idempotent: true,
      operationId: 'records_create',
      summary: 'Create one record, or many (all or nothing)',
      description: `An object → 201 {data}; an array (at most ${records.MAX_BULK_CREATE}) → 201 {data: [...]}, in one statement. Validation errors are keyed by field (\`{row}.{field}\` for arrays); unique/foreign-key violations name the field (409/400). ${WHO_WRITE}`,
      body: Type.Unknown(),
      responses: { 201: RecordsCreated },
      async handler(ctx, { params, body }) {
        const data = await records.createRecords(ctx.state.service(), scopeOf(params), params.name!, body);
        ctx.status = 201;
        send(ctx, { data });
      },
    }, 'records'),
    ...perTable({
      method: 'post',
      suffix: 'data/import/',
      operationId: 'records_import_csv',
      statementTimeout: 'long',
      summary: 'Import records from CSV (all or nothing)',
      description: `A \`text/csv\` body (415 otherwise) whose header names the fields; query \`mapping\` (a JSON object of CSV header → field) renames columns, \`delimiter\` (one character, or \`tab\`; default: sniffed from the header line among \`,\` \`;\` and tab), \`encoding\` (a WHATWG label such as \`latin1\` or \`utf-16le\`; default UTF-8, a UTF-16 byte-order mark is followed; bytes invalid in it → 400 naming where), \`dry_run=true\` checks everything (validation and database constraints) and writes nothing. Cells are coerced to the field types (empty → left out). The body is received whole (spooled to a temporary file) before the import starts. Unknown columns or mapping entries → 400 before any row is read. Every row valid → all inserted in one transaction, 200 with the report {dry_run, delimiter, encoding, total_rows, created, failed, errors: [{row, errors: {field: [...]}}]}. Any row failing → nothing written, 400 VALIDATION_ERROR with that report as \`data\` (every failing row counted in one run: invalid values, duplicate keys within the file or already in the table, references to missing records; the first ${MAX_REPORTED_ERRORS} listed, row 1 = the first record after the header); a dry run answers 200 with the report either way. At most ${MAX_IMPORT_ROWS} rows and ${MAX_IMPORT_BYTES} bytes (413). ${WHO_WRITE}`,
      rawBody: { mediaType: 'text/csv', description: 'CSV (RFC 4180; UTF-8 unless `encoding` says otherwise) with a header row' },
      responses: { 200: CsvImportReport },
      async handler(ctx, { params, query }) {
        const options = { ...csvImportOptions(query), declaredBytes: ctx.request.length };
        ctx.body = await importCsv(ctx.state.service(), scopeOf(params), params.name!, ctx.req, options);
      },
    }, 'records'),
    ...perTable({
      method: 'post',
      suffix: 'data/upsert/',
      bodyLimit: 'data',
      operationId: 'records_upsert',
      summary: 'Update the record with these unique values, else create it',
      description: `Query \`unique_fields=a,b\` names the fields whose values identify the record; the body is the whole record. 200 {data, created: false} when it existed (fields replaced), 201 {data, created: true} when inserted. ${WHO_WRITE}`,
      body: Type.Unknown(),
      responses: { 200: RecordUpserted, 201: RecordUpserted },
      async handler(ctx, { params, body, query }) {
        const out = await records.upsertRecord(ctx.state.service(), scopeOf(params), params.name!, body, query);
        ctx.status = out.created ? 201 : 200;
        ctx.body = out;
      },
    }, 'records'),
    ...perTable({
      method: 'patch',
      suffix: 'data/',
      bodyLimit: 'data',
      operationId: 'records_partial_update_many',
      summary: 'Update many records (all or nothing)',
      description: `An array (at most ${records.MAX_BULK_PATCH}) of partial records, each carrying its primary key; each resulting record is validated; errors are keyed \`{index}.{field}\` and nothing is changed when one fails. ${WHO_WRITE}`,
      body: Type.Unknown(),
      responses: { 200: RecordsPatched },
      async handler(ctx, { params, body }) {
        ctx.body = { data: await records.patchRecords(ctx.state.service(), scopeOf(params), params.name!, body) };
      },
    }, 'records'),
    ...perTable({
      method: 'delete',
      suffix: 'data/',
      bodyLimit: 'data',
      operationId: 'records_destroy_many',
      summary: 'Delete records by ids or by filter',
      description: `\`ids=a,b\` (composite keys: a JSON array of key arrays) → {deleted, ids}; \`filter=<JSON object of field conditions>\` (same operators as the list, e.g. {"age__gte":30}) → {deleted}; an empty filter is refused. ${WHO_WRITE}`,
      responses: { 200: RecordsDeleted },
      async handler(ctx, { params, query }) {
        ctx.body = await records.deleteRecords(ctx.state.service(), scopeOf(params), params.name!, query);
      },
    }, 'records'),
    ...perTable({
      method: 'get',
      suffix: 'data/:pk/',
      extraParams: RecordKeyParam,
      operationId: 'records_retrieve',
      summary: 'Get a record by primary key',
      description: `The key's value; for a composite key the values in primaryKey order, comma-separated (\`1001,2\`) or as a JSON array. ${READ} ${HIERARCHY} ${WHO_READ}`,
      responses: { 200: RecordData },
      async handler(ctx, { params, query }) {
        const found = await records.getRecord(ctx.state.service(), scopeOf(params), params.name!, params.pk!, query, graph);
        send(ctx, found instanceof HierarchyBody ? found.body : { data: found });
      },
    }, 'records'),
    ...perTable({
      method: 'patch',
      suffix: 'data/:pk/',
      extraParams: RecordKeyParam,
      operationId: 'records_partial_update',
      summary: 'Update some fields of a record',
      description: `The resulting record is validated against the table schema. ${WHO_WRITE}`,
      body: Type.Unknown(),
      responses: { 200: RecordData },
      async handler(ctx, { params, body }) {
        send(ctx, { data: await records.patchRecord(ctx.state.service(), scopeOf(params), params.name!, params.pk!, body) });
      },
    }, 'records'),
    ...perTable({
      method: 'delete',
      suffix: 'data/:pk/',
      extraParams: RecordKeyParam,
      operationId: 'records_destroy',
      summary: 'Delete a record',
      description: WHO_WRITE,
      responses: { 204: null },
      async handler(ctx, { params }) {
        await records.deleteRecord(ctx.state.service(), scopeOf(params), params.name!, params.pk!);
        ctx.status = 204;
      },
    }, 'records'),
  ];
}
