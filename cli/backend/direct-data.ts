// Direct mode on a site's data tables and records (`--site <schema> --app <slug>`): the
// shared services in the site schema as the system actor, path parameters and bodies checked
// as the routes check them, and exactly the bodies the API answers.
import type { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import { createdBody, messageBody, type CreatedBody, type MessageBody } from '../../shared/common/envelopes.ts';
import { pageEnvelope, type PageEnvelope } from '../../shared/common/pagination.ts';
import { validate } from '../../shared/common/validation.ts';
import type { ServiceContext } from '../../shared/context.ts';
import {
  AppParams, DATATABLE_MESSAGES, RecordKeyParam, SourceParams, TableParams, ValidateDataBody,
  type DataTableCreate, type DataTableListItem, type DataTableStats, type DataTableUpdate, type DataTableView,
} from '../../shared/data/datatable.schemas.ts';
import * as tables from '../../shared/data/datatable.service.ts';
import { csvImportOptions, exportCsv, importCsv } from '../../shared/data/records-csv.ts';
import * as records from '../../shared/data/records.service.ts';
import { PATHS, withQuery } from './paths.ts';
import { csvImportQuery, TABLE_PATHS } from './table-paths.ts';
import type {
  CsvImportOptions, CsvImportReport, DataBackend, DeletedBody, RecordPageBody, RecordQuery, RecordRow, TableListParams, TableSchemaView, ValidateDataView,
} from './types.ts';

/** The path parameters of `…/data/:pk/`, as the records routes declare them. */
const RecordParams = Type.Object({ ...TableParams.properties, ...RecordKeyParam });


export interface DirectDataDeps {
  /** The context of the system actor in the site whose schema is `site` (404 as the API answers). */
  siteCtx(site: string): Promise<ServiceContext>;
  /** The absolute URL the API would have seen for this path and query (pagination links). */
  requestUrl(pathAndQuery: string): string;
}

export class DirectData implements DataBackend {
  private readonly deps: DirectDataDeps;

  constructor(deps: DirectDataDeps) {
    this.deps = deps;
  }

  private app(app: string): string {
    return validate(AppParams, { app_slug: app }, 'query').app_slug;
  }

  private table(app: string, name: string): { scope: tables.TableScope; name: string } {
    const p = validate(TableParams, { app_slug: app, name }, 'query');
    return { scope: { app_slug: p.app_slug }, name: p.name };
  }

  private record(app: string, name: string, id: string): { scope: tables.TableScope; name: string; pk: string } {
    const p = validate(RecordParams, { app_slug: app, name, pk: id }, 'query');
    return { scope: { app_slug: p.app_slug }, name: p.name, pk: p.pk };
  }

  async listTables(site: string, app: string, query: TableListParams): Promise<PageEnvelope<DataTableListItem>> {
    const ctx = await this.deps.siteCtx(site);
    const page = await tables.listDataTables(ctx, { app_slug: this.app(app) }, { ...query });
    return pageEnvelope(page, this.deps.requestUrl(PATHS.siteApi(site) + withQuery(TABLE_PATHS.tables(app), { ...query })));
  }

  async createTable(site: string, app: string, ds: string, input: DataTableCreate): Promise<CreatedBody<DataTableView>> {
    const ctx = await this.deps.siteCtx(site);
    const p = validate(SourceParams, { app_slug: app, ds }, 'query');
    return createdBody(DATATABLE_MESSAGES.created, await tables.createDataTable(ctx, { app_slug: p.app_slug, ds: p.ds }, structuredClone(input)));
  }

  async getTable(site: string, app: string, name: string): Promise<DataTableView> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, name);
    return tables.getDataTable(ctx, t.scope, t.name);
  }

  async updateTable(site: string, app: string, name: string, input: DataTableUpdate): Promise<DataTableView> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, name);
    return tables.updateDataTable(ctx, t.scope, t.name, structuredClone(input));
  }

  async deleteTable(site: string, app: string, name: string): Promise<MessageBody> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, name);
    await tables.deleteDataTable(ctx, t.scope, t.name);
    return messageBody(DATATABLE_MESSAGES.deleted);
  }

  async materializeTable(site: string, app: string, name: string): Promise<CreatedBody<DataTableView>> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, name);
    return createdBody(DATATABLE_MESSAGES.materialized, await tables.materializeDataTable(ctx, t.scope, t.name));
  }

  async tableSchema(site: string, app: string, name: string): Promise<TableSchemaView> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, name);
    return tables.dataTableSchema(ctx, t.scope, t.name);
  }

  async validateTableData(site: string, app: string, name: string, data: unknown[]): Promise<ValidateDataView> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, name);
    const body = validate(ValidateDataBody, { data: structuredClone(data) });
    return tables.validateTableData(ctx, t.scope, t.name, body.data);
  }

  async tableStats(site: string, app: string): Promise<DataTableStats> {
    const ctx = await this.deps.siteCtx(site);
    return tables.dataTableStats(ctx, this.app(app));
  }

  async listRecords(site: string, app: string, table: string, query: RecordQuery): Promise<RecordPageBody> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, table);
    return records.listRecords(ctx, t.scope, t.name, { ...query });
  }

  async getRecord(site: string, app: string, table: string, id: string, query: RecordQuery): Promise<{ data: RecordRow }> {
    const ctx = await this.deps.siteCtx(site);
    const r = this.record(app, table, id);
    return { data: await records.getRecord(ctx, r.scope, r.name, r.pk, { ...query }) };
  }

  async createRecords(site: string, app: string, table: string, body: unknown): Promise<{ data: RecordRow | RecordRow[] }> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, table);
    return { data: await records.createRecords(ctx, t.scope, t.name, structuredClone(body)) };
  }

  async upsertRecord(site: string, app: string, table: string, body: unknown, uniqueFields: string): Promise<{ data: RecordRow; created: boolean }> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, table);
    return records.upsertRecord(ctx, t.scope, t.name, structuredClone(body), { unique_fields: uniqueFields });
  }

  async patchRecord(site: string, app: string, table: string, id: string, body: unknown): Promise<{ data: RecordRow }> {
    const ctx = await this.deps.siteCtx(site);
    const r = this.record(app, table, id);
    return { data: await records.patchRecord(ctx, r.scope, r.name, r.pk, structuredClone(body)) };
  }

  async patchRecords(site: string, app: string, table: string, body: unknown): Promise<{ data: RecordRow[] }> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, table);
    return { data: await records.patchRecords(ctx, t.scope, t.name, structuredClone(body)) };
  }

  async deleteRecord(site: string, app: string, table: string, id: string): Promise<void> {
    const ctx = await this.deps.siteCtx(site);
    const r = this.record(app, table, id);
    await records.deleteRecord(ctx, r.scope, r.name, r.pk);
  }

  async deleteRecords(site: string, app: string, table: string, query: { ids?: string; filter?: string }): Promise<DeletedBody> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, table);
    const q = Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined));
    return records.deleteRecords(ctx, t.scope, t.name, q);
  }

  async exportCsv(site: string, app: string, table: string, query: RecordQuery): Promise<Readable> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, table);
    return exportCsv(ctx, t.scope, t.name, { ...query, format: 'csv' });
  }

  async importCsv(site: string, app: string, table: string, open: () => Readable, options: CsvImportOptions): Promise<CsvImportReport> {
    const ctx = await this.deps.siteCtx(site);
    const t = this.table(app, table);
    // The options as the route reads them from the query string the remote backend sends.
    return importCsv(ctx, t.scope, t.name, open(), csvImportOptions(csvImportQuery(options)));
  }
}
