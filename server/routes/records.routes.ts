// Records of flat_table data tables (scope 'tenant'), spec Part 2 §4 "Data records": served
// under /api/apps/{app_slug}/datatables/{name}/data/ and with the data source segment
// /api/apps/{app_slug}/datasources/{ds}/datatables/{name}/data/. docs/data-tables.md.
import { Type, type TSchema } from '@sinclair/typebox';
import { SourceTableParams, TableParams } from '../../shared/data/datatable.schemas.ts';
import type { TableScope } from '../../shared/data/datatable.service.ts';
import { recordsService as records } from '../../shared/data/records.service.ts';
import { defineRoute, type Method, type RouteDef, type RouteInput } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const WHO_WRITE = 'Site administrators (superusers and staff of the site) only.';
const WHO_READ = 'Any user of the site.';
const FILTERS = 'Conditions `field=value` or `field__op=value` with op one of eq, ne, gt, gte, lt, lte, in, nin (comma lists), contains, icontains, startswith, istartswith, endswith, iendswith, isnull (true/false), between (low,high); all must hold.';

const Record_ = Type.Record(Type.String(), Type.Unknown());
const RecordData = Type.Object({ data: Record_ });
const RecordPage = Type.Object({ data: Type.Array(Record_), total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer() });
const Deleted = Type.Object({ deleted: Type.Integer(), ids: Type.Optional(Type.Array(Type.Unknown())) });
const withPk = (params: typeof TableParams | typeof SourceTableParams) => Type.Object({ ...params.properties, pk: Type.String({ minLength: 1, maxLength: 200 }) });

const scopeOf = (params: Record<string, string>): TableScope => ({ app_slug: params.app_slug!, ...(params.ds ? { ds: params.ds } : {}) });

interface RecordRoute {
  method: Method;
  /** '' (the collection) or ':pk/' (one record). */
  suffix: '' | ':pk/';
  operationId: string;
  summary: string;
  description: string;
  body?: TSchema;
  responses: Record<number, TSchema | null>;
  handler: (ctx: AppContext, input: RouteInput) => Promise<void>;
}

/** One records operation, with and without the data source segment. */
function perTable(r: RecordRoute): RouteDef[] {
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: ['records'] };
  const { suffix, operationId, ...rest } = r;
  const one = suffix !== '';
  return [
    defineRoute({ ...base, ...rest, path: `/api/apps/:app_slug/datasources/:ds/datatables/:name/data/${suffix}`, operationId, params: one ? withPk(SourceTableParams) : SourceTableParams }),
    defineRoute({ ...base, ...rest, path: `/api/apps/:app_slug/datatables/:name/data/${suffix}`, operationId: `${operationId}_by_app`, params: one ? withPk(TableParams) : TableParams }),
  ];
}

export function recordRoutes(): RouteDef[] {
  return [
    ...perTable({
      method: 'get',
      suffix: '',
      operationId: 'records_list',
      summary: 'List records',
      description: `${FILTERS} Pages: page/page_size (default 20, at most 1000) or limit/offset. \`_sort\`: comma list of fields, \`-\` for descending. Answers {data, total, page, page_size}. ${WHO_READ}`,
      responses: { 200: RecordPage },
      async handler(ctx, { params, query }) {
        ctx.body = await records.list(ctx.state.service(), scopeOf(params), params.name!, query);
      },
    }),
    ...perTable({
      method: 'post',
      suffix: '',
      operationId: 'records_create',
      summary: 'Create one record, or many (all or nothing)',
      description: `An object → 201 {data}; an array (at most 1000) → 201 {data: [...]}, in one transaction. Validation errors are keyed by field (\`{row}.{field}\` for arrays); unique/foreign-key violations name the field (409/400). ${WHO_WRITE}`,
      body: Type.Unknown(),
      responses: { 201: Type.Object({ data: Type.Union([Record_, Type.Array(Record_)]) }) },
      async handler(ctx, { params, body }) {
        ctx.status = 201;
        ctx.body = { data: await records.create(ctx.state.service(), scopeOf(params), params.name!, body) };
      },
    }),
    ...perTable({
      method: 'delete',
      suffix: '',
      operationId: 'records_destroy_many',
      summary: 'Delete records by ids or by filter',
      description: `\`ids=a,b\` → {deleted, ids}; \`filter=<JSON object of field conditions>\` (same operators as the list, e.g. {"age__gte":30}) → {deleted}; an empty filter is refused. ${WHO_WRITE}`,
      responses: { 200: Deleted },
      async handler(ctx, { params, query }) {
        ctx.body = await records.removeMany(ctx.state.service(), scopeOf(params), params.name!, query);
      },
    }),
    ...perTable({
      method: 'get',
      suffix: ':pk/',
      operationId: 'records_retrieve',
      summary: 'Get a record by primary key',
      description: `Tables with a single-field primary key. ${WHO_READ}`,
      responses: { 200: RecordData },
      async handler(ctx, { params }) {
        ctx.body = { data: await records.get(ctx.state.service(), scopeOf(params), params.name!, params.pk!) };
      },
    }),
    ...perTable({
      method: 'patch',
      suffix: ':pk/',
      operationId: 'records_partial_update',
      summary: 'Update some fields of a record',
      description: `The resulting record is validated against the table schema. ${WHO_WRITE}`,
      body: Type.Unknown(),
      responses: { 200: RecordData },
      async handler(ctx, { params, body }) {
        ctx.body = { data: await records.patch(ctx.state.service(), scopeOf(params), params.name!, params.pk!, body) };
      },
    }),
    ...perTable({
      method: 'delete',
      suffix: ':pk/',
      operationId: 'records_destroy',
      summary: 'Delete a record',
      description: WHO_WRITE,
      responses: { 204: null },
      async handler(ctx, { params }) {
        await records.remove(ctx.state.service(), scopeOf(params), params.name!, params.pk!);
        ctx.status = 204;
      },
    }),
  ];
}
