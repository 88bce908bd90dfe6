// The queries of data tables ("<schema>".data_tables): the table row with what it joins, its
// views, the lookups by scope, name and id, and the writes of a new row. The service
// (datatable.service.ts) checks permissions and the rules, then calls these.
import type { EntityManager } from '@mikro-orm/postgresql';
import { activeApp } from '../apps/lookup.ts';
import { checkAppCount } from '../apps/app-settings.service.ts';
import { uniqueViolation } from '../common/slug.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { firstRow, iso, rows } from '../db/sql.ts';
import { DomainError, fieldError, notFound, validationError } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { physicalTableName, type ProviderType } from './ddl.ts';
import type { DataTableListItem, DataTableView } from './datatable.schemas.ts';
import { fieldNamesOf, foreignKeysOf, primaryKeyOf, schemaHash, validateTableSchema, type TableSchema } from './table-schema.ts';

/** A data source as a table names it. */
export interface SourceRow { id: number; name: string; slug: string; provider_type: ProviderType; is_active: boolean }
/** A data table's row with its data source, app and reference source (SELECT). */
export interface TableRow {
  id: number;
  app_id: number;
  data_source_id: number;
  datasource_name: string;
  datasource_slug: string;
  provider_type: ProviderType;
  app_name: string;
  app_slug: string;
  name: string;
  description: string;
  json_schema: TableSchema;
  schema_hash: string;
  physical_table_name: string;
  is_materialized: boolean;
  is_active: boolean;
  is_reference: boolean;
  source_table_id: number | null;
  src_id: number | null;
  src_app: string | null;
  src_name: string | null;
  src_physical: string | null;
  created_at: Date | string;
  updated_at: Date | string;
  created_by: string | null;
  modified_by: string | null;
}

/** Where a table is addressed: an app, optionally through one of its data sources. */
export interface TableScope {
  app_slug: string;
  ds?: string;
}

/** The SELECT of table rows (TableRow) with their data source, app and reference source; add a WHERE. */
export const SELECT = (q: string) => `
  SELECT t.id, t.app_id, t.data_source_id, d.name AS datasource_name, d.slug AS datasource_slug, d.provider_type,
         a.name AS app_name, a.slug AS app_slug, t.name, t.description, t.json_schema, t.schema_hash, t.physical_table_name,
         t.is_materialized, t.is_active, t.is_reference, t.source_table_id,
         s.id AS src_id, sa.slug AS src_app, s.name AS src_name, s.physical_table_name AS src_physical,
         t.created_at, t.updated_at, t.created_by, t.modified_by
    FROM ${q}.data_tables t
    JOIN ${q}.data_sources d ON d.id = t.data_source_id
    JOIN ${q}.apps a ON a.id = t.app_id
    LEFT JOIN ${q}.data_tables s ON s.id = t.source_table_id
    LEFT JOIN ${q}.apps sa ON sa.id = s.app_id`;

/** A table row as the list shows it. */
export function listItem(r: TableRow): DataTableListItem {
  return {
    id: r.id,
    name: r.name,
    datasource_name: r.datasource_name,
    datasource_slug: r.datasource_slug,
    app_name: r.app_name,
    app_slug: r.app_slug,
    physical_table_name: r.src_physical ?? r.physical_table_name,
    is_materialized: r.is_materialized,
    is_active: r.is_active,
    field_count: fieldNamesOf(r.json_schema).length,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

/** A table row as the API shows it. */
export function view(r: TableRow): DataTableView {
  const names = fieldNamesOf(r.json_schema);
  return {
    id: r.id,
    data_source: r.data_source_id,
    datasource_name: r.datasource_name,
    datasource_slug: r.datasource_slug,
    app_name: r.app_name,
    app_slug: r.app_slug,
    name: r.name,
    description: r.description,
    json_schema: r.json_schema,
    physical_table_name: r.src_physical ?? r.physical_table_name,
    is_materialized: r.is_materialized,
    is_active: r.is_active,
    schema_hash: r.schema_hash.trim(),
    field_count: names.length,
    field_names: names,
    primary_key: primaryKeyOf(r.json_schema),
    provider_type: r.provider_type,
    schema_format: 'frictionless',
    is_reference: r.is_reference,
    source_info: r.is_reference && r.src_id !== null
      ? { id: r.src_id, app: r.src_app!, table: r.src_name!, physical_table_name: r.src_physical! }
      : null,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
    created_by: r.created_by,
    modified_by: r.modified_by,
  };
}

/** A data source of the app by slug; 404 otherwise. */
export async function findSource(em: EntityManager, schema: string, appId: number, slug: string): Promise<SourceRow> {
  const ds = await firstRow<SourceRow>(em, `SELECT id, name, slug, provider_type, is_active FROM ${quotedSchema(schema)}.data_sources WHERE app_id = ? AND slug = ?`, [appId, slug]);
  if (!ds) throw notFound(`Data source "${slug}"`);
  return ds;
}

/** A table row by id (one that exists). */
export async function tableRow(em: EntityManager, schema: string, id: number): Promise<TableRow> {
  return (await firstRow<TableRow>(em, `${SELECT(quotedSchema(schema))} WHERE t.id = ?`, [id]))!;
}

/** The table named in the scope (through the data source when the path names one); 404 otherwise. */
export async function findTable(em: EntityManager, schema: string, scope: TableScope, name: string): Promise<TableRow> {
  const app = await activeApp(em, schema, scope.app_slug);
  const ds = scope.ds ? await findSource(em, schema, app.id, scope.ds) : undefined;
  const row = await firstRow<TableRow>(em, `${SELECT(quotedSchema(schema))} WHERE t.app_id = ? AND t.name = ?${ds ? ' AND t.data_source_id = ?' : ''}`, [
    app.id, name, ...(ds ? [ds.id] : []),
  ]);
  if (!row) throw notFound(`Data table "${name}"`);
  return row;
}

/** Other tables of the app (name → column names), the targets a foreign key may name. */
export async function appTables(em: EntityManager, schema: string, appId: number, except?: number): Promise<Map<string, string[]>> {
  const found = await rows<{ id: number; name: string; json_schema: TableSchema }>(em, `SELECT id, name, json_schema FROM ${quotedSchema(schema)}.data_tables WHERE app_id = ?`, [appId]);
  return new Map(found.filter((r) => r.id !== except).map((r) => [r.name, fieldNamesOf(r.json_schema)]));
}

/** Whether a relation of this name exists in the site schema. */
export async function physicalExists(em: EntityManager, schema: string, table: string): Promise<boolean> {
  // Any relation (table, view, index, sequence) holds the name in the schema's namespace.
  return !!(await firstRow(em, 'SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ? AND c.relname = ?', [schema, table]));
}

/** `a{app_id}_{name}`, with a suffix while another table (row or physical) has it. */
export async function freePhysicalName(em: EntityManager, schema: string, appId: number, name: string): Promise<string> {
  for (let i = 1; ; i++) {
    const candidate = physicalTableName(appId, name, i);
    const taken = await firstRow(em, `SELECT 1 FROM ${quotedSchema(schema)}.data_tables WHERE physical_table_name = ?`, [candidate]);
    if (!taken && !(await physicalExists(em, schema, candidate))) return candidate;
  }
}

/** Tables of the app whose foreign keys name `name` (other than itself). */
export async function referencingTables(em: EntityManager, schema: string, table: TableRow): Promise<string[]> {
  const found = await rows<{ name: string; json_schema: TableSchema }>(em, `SELECT name, json_schema FROM ${quotedSchema(schema)}.data_tables WHERE app_id = ? AND id <> ?`, [table.app_id, table.id]);
  return found.filter((r) => foreignKeysOf(r.json_schema).some((fk) => fk.reference.resource === table.name)).map((r) => r.name);
}

/** Inserts a table row (app limit checked, physical name chosen); its id. 400 when the app has a table of that name. */
export async function insertTable(
  em: EntityManager, schema: string, ctx: ServiceContext,
  v: { appId: number; sourceId: number; name: string; description: string; doc: TableSchema; materialized: boolean; sourceTableId: number | null },
): Promise<number> {
  const q = quotedSchema(schema);
  await checkAppCount(em, schema, v.appId, 'max_datatables'); // spec §8, default 50
  const physical = await freePhysicalName(em, schema, v.appId, v.name);
  try {
    const [row] = await rows<{ id: number }>(
      em,
      `INSERT INTO ${q}.data_tables (app_id, data_source_id, name, description, json_schema, schema_hash, physical_table_name, is_materialized, is_reference, source_table_id, created_by, modified_by)
       VALUES (?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
      [v.appId, v.sourceId, v.name, v.description, JSON.stringify(v.doc), schemaHash(v.doc), physical, v.materialized, v.sourceTableId !== null, v.sourceTableId, actorUuid(ctx), actorUuid(ctx)],
    );
    return row!.id;
  } catch (err) {
    const constraint = uniqueViolation(err);
    if (constraint === 'data_tables_app_name_key') throw fieldError('name', `A data table named "${v.name}" already exists in this app.`);
    throw err;
  }
}

/**
 * An invalid table schema: `errors.json_schema`, every message; the error body carries it at the
 * top level too, the spec's `{json_schema: [messages]}` (Part 2 §7 item 1; DomainError.toBody).
 */
export const schemaError = (messages: string[], message = 'Invalid table schema.') => validationError({ json_schema: messages }, message);

/** The document if it is a valid table schema for this app (`except`: the table itself), else the 400 of schemaError. */
export async function checkedSchema(em: EntityManager, schema: string, appId: number, name: string, doc: unknown, except?: number): Promise<TableSchema> {
  const problems = validateTableSchema(doc, await appTables(em, schema, appId, except), name);
  if (problems.length) throw schemaError(problems);
  return doc as TableSchema;
}

