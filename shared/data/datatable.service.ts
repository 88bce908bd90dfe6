// Data tables of a site's apps ("<schema>".data_tables): definitions by Frictionless Table
// Schema, materialization into a physical table of the site schema, reference tables onto
// another app's table. Decided on the DataTable subject (its app and name): site admins write
// (and materialize), every site user reads. docs/data-tables.md.
import type { EntityManager } from '@mikro-orm/postgresql';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { longTransaction } from '../db/long-operations.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { countOf, executeNative, firstRow, pgCode, rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { authorize } from '../policies/hook.ts';
import { tableKind } from './records/access.ts';
import type { Action } from '../auth/actor.ts';
import { createDataSource } from '../apps/datasource.service.ts';
import { activeApp, type ActiveApp } from '../apps/lookup.ts';
import { createTableDdl, dropTableDdl } from './ddl.ts';
import { attachChangeLog, forgetChangeLog, physicalKey } from '../realtime/changelog.ts';
import { dropEdgesDdl } from './graph/ddl.ts';
import { hasEdges } from './graph/schema.ts';
import { edgesDdlFor } from './graph/tables.ts';
import {
  DataTableCreate, DataTableListQuery, DataTableUpdate, ImportReference,
  type DataTableListItem, type DataTableStats, type DataTableView,
} from './datatable.schemas.ts';
import {
  SELECT, checkedSchema, findSource, findTable, insertTable, listItem, physicalExists, referencingTables, schemaError, tableRow, view,
  type TableRow, type TableScope,
} from './datatable.queries.ts';
import { migrateTable, recordTableOperation } from './migrations/migration.service.ts';
import { stripRenames } from './migrations/plan.ts';
import { validateRecords, type RecordCheck } from './record-validator.ts';
import { foreignKeysOf, hasSchemaHash, schemaHash, type TableSchema } from './table-schema.ts';

export type { TableScope } from './datatable.queries.ts';

const DEFAULT_SOURCE_DESCRIPTION = 'Created to hold reference tables imported into this app.';

/** Table names a fixed route of the app takes (`/api/apps/{app}/datatables/stats/`): refused at creation. */
const RESERVED_NAMES = new Set(['stats']);
function checkName(field: 'name' | 'reference_name', name: string | undefined): void {
  if (name !== undefined && RESERVED_NAMES.has(name)) throw fieldError(field, `"${name}" is reserved: /api/apps/{app_slug}/datatables/${name}/ is a route of its own.`);
}

/** Actions on a table's definition that the app's policies decide too (spec Part 2 §2 system actions). */
const POLICY_DEFINITION_ACTIONS: ReadonlySet<Action> = new Set(['update', 'delete', 'materialize']);

/**
 * The table named in the scope, if the actor may `action` it: the DataTable subject (site
 * administrators change definitions), then, for update, delete and materialize, the app's
 * policies on the table's kind with the definition's attributes (docs/policies.md). 404 when
 * absent, 403 when denied. After siteSchemaFor, the check before the lookup.
 */
export async function tableFor(ctx: ServiceContext, schema: string, scope: TableScope, name: string, action: Action): Promise<TableRow> {
  const row = await findTable(ctx.em, schema, scope, name);
  await authorizeSiteSubject(ctx, action, 'DataTable', { schema, app: row.app_slug, name: row.name });
  if (POLICY_DEFINITION_ACTIONS.has(action)) {
    const attr = { name: row.name, provider_type: row.provider_type, is_materialized: row.is_materialized, is_reference: row.is_reference, datasource: row.datasource_slug };
    await authorize(ctx, schema, { id: row.app_id, slug: row.app_slug }, tableKind(row.name), action, { id: String(row.id), attr });
  }
  return row;
}

/** Creates one reference (the import-reference rules of spec §4); errors are DomainErrors. */
async function createReference(ctx: ServiceContext, schema: string, target: ActiveApp, raw: unknown): Promise<DataTableView> {
  const input = validate(ImportReference, raw);
  checkName('reference_name', input.reference_name);
  const source = await activeApp(ctx.em, schema, input.source_app_slug);
  if (source.id === target.id) throw fieldError('source_app_slug', 'The source app must be another app than the target app.');
  const src = await firstRow<TableRow>(ctx.em, `${SELECT(quotedSchema(schema))} WHERE t.app_id = ? AND t.name = ?`, [source.id, input.source_table_name]);
  if (!src) throw notFound({ message: `Data table "${input.source_table_name}" not found in app "${source.slug}".` });
  await authorizeSiteSubject(ctx, 'read', 'DataTable', { schema, app: source.slug, name: src.name });
  if (src.is_reference) throw fieldError('source_table_name', 'The source table is itself a reference; import the original table.');
  if (!src.is_materialized) throw fieldError('source_table_name', 'The source table is not materialized.');
  if (!(await physicalExists(ctx.em, schema, src.physical_table_name))) throw fieldError('source_table_name', 'The source table does not physically exist.');
  const name = input.reference_name ?? src.name;
  await authorizeSiteSubject(ctx, 'create', 'DataTable', { schema, app: target.slug, name });
  if (await firstRow(ctx.em, `SELECT 1 FROM ${quotedSchema(schema)}.data_tables WHERE app_id = ? AND name = ?`, [target.id, name])) {
    throw fieldError('reference_name', `A data table named "${name}" already exists in app "${target.slug}".`);
  }
  // The reference belongs to a data source of the target app: one of the source's provider type,
  // else the first; an app without any gets its default data source, made as the data source
  // service makes one (slug `default`, the source's provider type).
  const ds = (await firstRow<{ id: number }>(
    ctx.em,
    `SELECT id FROM ${quotedSchema(schema)}.data_sources WHERE app_id = ? ORDER BY (provider_type = ?) DESC, id LIMIT 1`,
    [target.id, src.provider_type],
  )) ?? (await createDataSource(ctx, target.slug, { name: 'Default', provider_type: src.provider_type, description: DEFAULT_SOURCE_DESCRIPTION }));
  const id = await insertTable(ctx.em, schema, ctx, {
    appId: target.id, sourceId: ds.id, name, description: src.description, doc: src.json_schema, materialized: true, sourceTableId: src.id,
  });
  return view(await tableRow(ctx.em, schema, id));
}

export async function listDataTables(ctx: ServiceContext, scope: TableScope, rawQuery: unknown = {}): Promise<Page<DataTableListItem>> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataTable');
  const query = validate(DataTableListQuery, rawQuery, 'query');
  const app = await activeApp(ctx.em, schema, scope.app_slug);
  await authorizeSiteSubject(ctx, 'read', 'DataTable', { schema, app: app.slug });
  const where = ['t.app_id = ?'];
  const params: unknown[] = [app.id];
  const dsSlug = scope.ds ?? query.datasource;
  if (scope.ds) await findSource(ctx.em, schema, app.id, scope.ds);
  if (dsSlug) { where.push('d.slug = ?'); params.push(dsSlug); }
  if (query.is_materialized !== undefined) { where.push('t.is_materialized = ?'); params.push(query.is_materialized); }
  const q = quotedSchema(schema);
  const cond = where.join(' AND ');
  const count = await countOf(ctx.em, `SELECT count(*) AS n FROM ${q}.data_tables t JOIN ${q}.data_sources d ON d.id = t.data_source_id WHERE ${cond}`, params);
  const page = resolvePage(parsePageRequest(query), count);
  const found = await rows<TableRow>(ctx.em, `${SELECT(q)} WHERE ${cond} ORDER BY t.name, t.id LIMIT ? OFFSET ?`, [...params, page.pageSize, pageOffset(page)]);
  return { ...page, count, results: found.map(listItem) };
}

export async function createDataTable(ctx: ServiceContext, scope: Required<TableScope>, rawInput: unknown): Promise<DataTableView> {
  const schema = await siteSchemaFor(ctx, 'create', 'DataTable');
  const input = validate(DataTableCreate, rawInput);
  checkName('name', input.name);
  const app = await activeApp(ctx.em, schema, scope.app_slug);
  const ds = await findSource(ctx.em, schema, app.id, scope.ds);
  await authorizeSiteSubject(ctx, 'create', 'DataTable', { schema, app: app.slug, name: input.name });
  const doc = await checkedSchema(ctx.em, schema, app.id, input.name, input.json_schema);
  const id = await insertTable(ctx.em, schema, ctx, { appId: app.id, sourceId: ds.id, name: input.name, description: input.description ?? '', doc, materialized: false, sourceTableId: null });
  return view(await tableRow(ctx.em, schema, id));
}

export async function getDataTable(ctx: ServiceContext, scope: TableScope, name: string): Promise<DataTableView> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataTable');
  return view(await tableFor(ctx, schema, scope, name, 'read'));
}

/**
 * PUT and PATCH: description and json_schema. A changed schema (a new schema_hash once
 * `x-rename-from` is stripped) replaces the stored one while the table is not materialized; on a
 * materialized table it is a migration (migrations/migration.service.ts). An identical schema is
 * never a change, so a client may GET the table, change one field and PUT it back.
 */
export async function updateDataTable(ctx: ServiceContext, scope: TableScope, name: string, rawInput: unknown): Promise<DataTableView> {
  const schema = await siteSchemaFor(ctx, 'update', 'DataTable');
  const input = validate(DataTableUpdate, rawInput);
  const row = await tableFor(ctx, schema, scope, name, 'update');
  dropReadOnly(DataTableUpdate, input, view(row));
  let doc: TableSchema | undefined;
  if (input.json_schema !== undefined && !hasSchemaHash(input.json_schema, row.schema_hash.trim())) {
    if (row.is_reference) throw new DomainError('CONFLICT', 'A reference table takes its schema from the source table.');
    const checked = await checkedSchema(ctx.em, schema, row.app_id, row.name, input.json_schema, row.id);
    if (row.is_materialized) {
      await migrateTable(ctx, schema, row.id, checked, input.description);
      return view(await tableRow(ctx.em, schema, row.id));
    }
    doc = stripRenames(checked);
  }
  await ctx.em.execute(
    `UPDATE ${quotedSchema(schema)}.data_tables
        SET description = coalesce(?, description), json_schema = coalesce(?::jsonb, json_schema), schema_hash = coalesce(?, schema_hash),
            updated_at = now(), modified_by = ?
      WHERE id = ?`,
    [input.description ?? null, doc ? JSON.stringify(doc) : null, doc ? schemaHash(doc) : null, actorUuid(ctx), row.id],
  );
  return view(await tableRow(ctx.em, schema, row.id));
}

/** Deletes the definition and drops the physical table (not a reference's source). 400 while another table references it. */
export async function deleteDataTable(ctx: ServiceContext, scope: TableScope, name: string): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'delete', 'DataTable');
  const row = await tableFor(ctx, schema, scope, name, 'delete');
  const referencing = await referencingTables(ctx.em, schema, row);
  if (referencing.length) throw new DomainError('BAD_REQUEST', `Data table "${name}" is referenced by a foreign key of: ${referencing.join(', ')}.`);
  const refs = await rows<{ name: string; app: string }>(
    ctx.em,
    `SELECT t.name, a.slug AS app FROM ${quotedSchema(schema)}.data_tables t JOIN ${quotedSchema(schema)}.apps a ON a.id = t.app_id WHERE t.source_table_id = ?`,
    [row.id],
  );
  if (refs.length) throw new DomainError('BAD_REQUEST', `Data table "${name}" is the source of reference tables: ${refs.map((r) => `${r.app}.${r.name}`).join(', ')}.`);
  await ctx.em.transactional(async (tx) => {
    if (row.is_materialized && !row.is_reference) {
      const drop = [...(hasEdges(row.json_schema) ? dropEdgesDdl(schema, row.physical_table_name) : []), dropTableDdl(schema, row.physical_table_name)];
      for (const statement of drop) await tx.execute(statement);
      await forgetChangeLog(tx as EntityManager, schema, row.physical_table_name);
      await recordTableOperation(tx as EntityManager, schema, ctx, row, 'DROP_TABLE', drop);
    }
    await tx.execute(`DELETE FROM ${quotedSchema(schema)}.data_tables WHERE id = ?`, [row.id]);
  });
}

export async function dataTableSchema(ctx: ServiceContext, scope: TableScope, name: string): Promise<{ name: string; schema: TableSchema; schema_hash: string; field_count: number }> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataTable');
  const t = view(await tableFor(ctx, schema, scope, name, 'read'));
  return { name: t.name, schema: t.json_schema as TableSchema, schema_hash: t.schema_hash, field_count: t.field_count };
}

export async function validateTableData(ctx: ServiceContext, scope: TableScope, name: string, records: unknown[]): Promise<RecordCheck> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataTable');
  const row = await tableFor(ctx, schema, scope, name, 'read');
  return validateRecords(row.json_schema, records, row.schema_hash.trim());
}

/** Creates the physical table in one transaction; foreign-key targets must be materialized first. */
export async function materializeDataTable(ctx: ServiceContext, scope: TableScope, name: string): Promise<DataTableView> {
  const schema = await siteSchemaFor(ctx, 'materialize', 'DataTable');
  const row = await tableFor(ctx, schema, scope, name, 'materialize');
  if (row.is_reference) throw new DomainError('BAD_REQUEST', 'A reference table is served by its source table and cannot be materialized.');
  if (row.is_materialized) throw new DomainError('BAD_REQUEST', `Data table "${name}" is already materialized.`);
  const doc = await checkedSchema(ctx.em, schema, row.app_id, row.name, row.json_schema, row.id);
  const q = quotedSchema(schema);
  const targets = new Map<string, string>();
  for (const [i, fk] of foreignKeysOf(doc).entries()) {
    const resource = fk.reference.resource;
    if (resource === '' || resource === row.name) continue;
    const t = await firstRow<TableRow>(ctx.em, `${SELECT(q)} WHERE t.app_id = ? AND t.name = ?`, [row.app_id, resource]);
    if (!t?.is_materialized) {
      throw schemaError([`foreignKeys[${i}] (${fk.fields.join(', ')} → ${resource}): the referenced table "${resource}" is not materialized; materialize it first.`], 'Foreign key target not materialized.');
    }
    targets.set(resource, t.src_physical ?? t.physical_table_name);
  }
  const ddl = createTableDdl(doc, {
    schema, table: row.physical_table_name, provider: row.provider_type,
    resolveTable: (resource) => (resource === row.name ? row.physical_table_name : targets.get(resource)!),
  });
  if (hasEdges(doc)) {
    const edges = await edgesDdlFor(ctx.em, schema, row.physical_table_name, doc, row.provider_type);
    if (edges.problems.length) throw schemaError(edges.problems, 'The edges table could not be created.');
    ddl.push(...edges.ddl);
  }
  try {
    await longTransaction(ctx, async (tx) => {
      for (const statement of ddl) await executeNative(tx, statement);
      await attachChangeLog(tx, schema, row.physical_table_name, physicalKey(row.provider_type, doc));
      await recordTableOperation(tx, schema, ctx, row, 'CREATE_TABLE', ddl);
      await tx.execute(`UPDATE ${q}.data_tables SET is_materialized = true, updated_at = now(), modified_by = ? WHERE id = ?`, [actorUuid(ctx), row.id]);
    });
  } catch (err) {
    const code = pgCode(err);
    // Class 42 (syntax/definition) and 22 (data): the schema asks for something PostgreSQL refuses.
    if (code && (code.startsWith('42') || code.startsWith('22'))) {
      throw schemaError([`PostgreSQL refused the table: ${(err as Error).message.split('\n')[0]!.replace(/^.* - /, '')}`], 'The table could not be created.');
    }
    throw err;
  }
  return view(await tableRow(ctx.em, schema, row.id));
}

export async function dataTableStats(ctx: ServiceContext, appSlug: string): Promise<DataTableStats> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataTable');
  const app = await activeApp(ctx.em, schema, appSlug);
  await authorizeSiteSubject(ctx, 'read', 'DataTable', { schema, app: app.slug });
  const q = quotedSchema(schema);
  const found = await rows<{ slug: string; name: string; provider_type: string; table_count: string; materialized_count: string }>(
    ctx.em,
    `SELECT d.slug, d.name, d.provider_type, count(t.id) AS table_count, count(t.id) FILTER (WHERE t.is_materialized) AS materialized_count
       FROM ${q}.data_sources d LEFT JOIN ${q}.data_tables t ON t.data_source_id = d.id
      WHERE d.app_id = ? GROUP BY d.id ORDER BY d.slug`,
    [app.id],
  );
  const total = found.reduce((n, r) => n + Number(r.table_count), 0);
  const materialized = found.reduce((n, r) => n + Number(r.materialized_count), 0);
  return {
    total_tables: total,
    materialized_tables: materialized,
    unmaterialized_tables: total - materialized,
    datasource_count: found.length,
    datasources: Object.fromEntries(found.map((r) => [r.slug, { name: r.name, provider_type: r.provider_type, table_count: Number(r.table_count), materialized_count: Number(r.materialized_count) }])),
  };
}

/**
 * POST …/datatables/import-reference/: one object → the reference (201); an array → each
 * item on its own, {created, failed, references, errors: [{index, reference, error}]} (207).
 */
export async function importReference(ctx: ServiceContext, targetAppSlug: string, body: unknown): Promise<{ single: true; table: DataTableView } | { single: false; result: ImportReferenceResult }> {
  const schema = await siteSchemaFor(ctx, 'create', 'DataTable');
  const target = await activeApp(ctx.em, schema, targetAppSlug);
  if (!Array.isArray(body)) return { single: true, table: await createReference(ctx, schema, target, body) };
  const result: ImportReferenceResult = { created: 0, failed: 0, references: [], errors: [] };
  for (const [index, item] of body.entries()) {
    try {
      result.references.push(await createReference(ctx, schema, target, item));
      result.created++;
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      result.failed++;
      result.errors.push({ index, reference: item, error: err.errors ?? err.message });
    }
  }
  return { single: false, result };
}

export interface ImportReferenceResult {
  created: number;
  failed: number;
  references: DataTableView[];
  errors: { index: number; reference: unknown; error: unknown }[];
}
