// Data tables of a site's apps (scope 'tenant'), spec Part 2 §4. Every per-table route is
// served both under /api/apps/{app_slug}/datasources/{ds}/datatables/{name}/ and without the
// data source segment as /api/apps/{app_slug}/datatables/{name}/. docs/data-tables.md.
import { Type, type TSchema } from '@sinclair/typebox';
import {
  AppParams, DATATABLE_MESSAGES, DataTableCreate, DataTableListItem, DataTableListQuery, DataTableStats, DataTableUpdate, DataTableView,
  ImportReferenceBody, ImportReferenceBulk, SchemaView, SourceParams, SourceTableParams, TableParams, ValidateDataBody, ValidateDataResult,
} from '../../shared/data/datatable.schemas.ts';
import * as tables from '../../shared/data/datatable.service.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type Method, type RouteDef, type RouteInput } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const WHO_WRITE = 'Site administrators (superusers and staff of the site) only.';
const WHO_READ = 'Any user of the site.';

export const scopeOf = (params: Record<string, string>): tables.TableScope => ({ app_slug: params.app_slug!, ...(params.ds ? { ds: params.ds } : {}) });

export interface TableRoute {
  method: Method;
  /** After `…/datatables/{name}/`: '' or 'schema/', 'data/:pk/' … */
  suffix: string;
  operationId: string;
  summary: string;
  description: string;
  body?: TSchema;
  query?: TSchema;
  responses: Record<number, TSchema | null>;
  handler: (ctx: AppContext, input: RouteInput) => Promise<void>;
  /** Path parameters after the table's own (records: `pk`). */
  extraParams?: Record<string, TSchema>;
  rawBody?: RouteDef['rawBody'];
  produces?: RouteDef['produces'];
  bodyLimit?: RouteDef['bodyLimit'];
  statementTimeout?: RouteDef['statementTimeout'];
  idempotent?: RouteDef['idempotent'];
}

/** The tags of the per-table routes whose writes are data (records, edges), never cached metadata (RouteDef.writes). */
const DATA_TAGS = new Set(['records', 'edges']);

/** One per-table operation, with and without the data source segment. */
export function perTable(r: TableRoute, tag = 'datatables'): RouteDef[] {
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: [tag], ...(DATA_TAGS.has(tag) ? { writes: 'data' as const } : {}) };
  const { suffix, operationId, extraParams, ...rest } = r;
  const params = (p: typeof TableParams | typeof SourceTableParams) => (extraParams ? Type.Object({ ...p.properties, ...extraParams }) : p);
  return [
    defineRoute({ ...base, ...rest, path: `/api/apps/:app_slug/datasources/:ds/datatables/:name/${suffix}`, operationId, params: params(SourceTableParams) }),
    defineRoute({ ...base, ...rest, path: `/api/apps/:app_slug/datatables/:name/${suffix}`, operationId: `${operationId}_by_app`, params: params(TableParams) }),
  ];
}

export function dataTableRoutes(publicUrl: string | undefined): RouteDef[] {
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: ['datatables'] };
  const update = (method: 'put' | 'patch'): RouteDef[] =>
    perTable({
      method,
      suffix: '',
      operationId: `datatables_${method === 'put' ? 'update' : 'partial_update'}`,
      summary: 'Update a data table',
      description: `A changed json_schema (new schema_hash; x-rename-from stripped) replaces the schema of a table that is not materialized, and migrates a materialized one: safe changes run at once, unsafe ones only when the data source allows data loss (400 naming them otherwise); each migration is recorded in operation-history/ (docs/migrations.md). ${WHO_WRITE}`,
      body: DataTableUpdate,
      responses: { 200: DataTableView },
      async handler(ctx, { params, body }) {
        ctx.body = await tables.updateDataTable(ctx.state.service(), scopeOf(params), params.name!, body);
      },
    });
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/datasources/:ds/datatables/',
      aliases: ['/api/apps/:app_slug/datasources/:ds/tables/'],
      operationId: 'datasource_datatables_list',
      summary: 'List the data tables of a data source',
      description: WHO_READ,
      params: SourceParams,
      query: DataTableListQuery,
      responses: { 200: paginated(DataTableListItem) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await tables.listDataTables(ctx.state.service(), scopeOf(params), query), publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/apps/:app_slug/datasources/:ds/datatables/',
      operationId: 'datasource_datatables_create',
      summary: 'Create a data table',
      description: `json_schema is a Frictionless Table Schema; every problem is reported in errors.json_schema (400). ${WHO_WRITE}`,
      params: SourceParams,
      body: DataTableCreate,
      responses: { 201: created(DataTableView) },
      async handler(ctx, { params, body }) {
        sendCreated(ctx, DATATABLE_MESSAGES.created, await tables.createDataTable(ctx.state.service(), { app_slug: params.app_slug!, ds: params.ds! }, body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/datatables/',
      operationId: 'datatables_list',
      summary: 'List the data tables of an app',
      description: `Filter by \`datasource\` (slug) and \`is_materialized\`. ${WHO_READ}`,
      params: AppParams,
      query: DataTableListQuery,
      responses: { 200: paginated(DataTableListItem) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await tables.listDataTables(ctx.state.service(), scopeOf(params), query), publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/datatables/stats/',
      operationId: 'datatables_stats',
      summary: 'Data table counts of an app, by data source',
      description: WHO_READ,
      params: AppParams,
      responses: { 200: DataTableStats },
      async handler(ctx, { params }) {
        ctx.body = await tables.dataTableStats(ctx.state.service(), params.app_slug!);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/apps/:app_slug/datatables/import-reference/',
      operationId: 'datatables_import_reference',
      summary: 'Import reference tables from other apps of the site',
      description: `Body {source_app_slug, source_table_name, reference_name?} → 201 with the reference; an array of them → 207 {created, failed, references, errors: [{index, reference, error}]}. The source table must be materialized, exist physically and not be a reference; reference_name (default: the source name) must be free in the target app. ${WHO_WRITE}`,
      params: AppParams,
      body: ImportReferenceBody,
      responses: { 201: created(DataTableView), 207: ImportReferenceBulk },
      async handler(ctx, { params, body }) {
        const out = await tables.importReference(ctx.state.service(), params.app_slug!, body);
        if (out.single) sendCreated(ctx, DATATABLE_MESSAGES.referenceCreated, out.table);
        else {
          ctx.status = 207;
          ctx.body = out.result;
        }
      },
    }),
    ...perTable({
      method: 'get',
      suffix: '',
      operationId: 'datatables_retrieve',
      summary: 'Get a data table',
      description: WHO_READ,
      responses: { 200: DataTableView },
      async handler(ctx, { params }) {
        ctx.body = await tables.getDataTable(ctx.state.service(), scopeOf(params), params.name!);
      },
    }),
    ...update('put'),
    ...update('patch'),
    ...perTable({
      method: 'delete',
      suffix: '',
      operationId: 'datatables_destroy',
      summary: 'Delete a data table',
      description: `Drops the physical table when materialized. 400 while another table's foreign key (or a reference table) points at it. ${WHO_WRITE}`,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await tables.deleteDataTable(ctx.state.service(), scopeOf(params), params.name!);
        sendMessage(ctx, DATATABLE_MESSAGES.deleted);
      },
    }),
    ...perTable({
      method: 'get',
      suffix: 'schema/',
      operationId: 'datatables_schema',
      summary: 'The table schema and its hash',
      description: WHO_READ,
      responses: { 200: SchemaView },
      async handler(ctx, { params }) {
        ctx.body = await tables.dataTableSchema(ctx.state.service(), scopeOf(params), params.name!);
      },
    }),
    ...perTable({
      method: 'post',
      suffix: 'validate_data/',
      operationId: 'datatables_validate_data',
      summary: 'Validate records against the table schema',
      description: `Nothing is stored. Errors read \`row N: field 'x': …\`. ${WHO_READ}`,
      body: ValidateDataBody,
      responses: { 200: ValidateDataResult },
      async handler(ctx, { params, body }) {
        ctx.body = await tables.validateTableData(ctx.state.service(), scopeOf(params), params.name!, (body as { data: unknown[] }).data);
      },
    }),
    ...perTable({
      method: 'post',
      suffix: 'materialize/',
      operationId: 'datatables_materialize',
      statementTimeout: 'long',
      summary: 'Create the physical table',
      description: `In one transaction, in the site schema. Foreign-key targets must be materialized first (400 naming the key); a second call is 400. ${WHO_WRITE}`,
      responses: { 200: created(DataTableView) },
      async handler(ctx, { params }) {
        const table = await tables.materializeDataTable(ctx.state.service(), scopeOf(params), params.name!);
        ctx.body = { status: 'success', message: DATATABLE_MESSAGES.materialized, data: table };
      },
    }),
  ];
}
