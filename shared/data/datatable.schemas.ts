// Data tables of an app (spec Part 2 §2 "Data table", §4): request and response shapes.
import { Type, type Static } from '@sinclair/typebox';
import { readOnlyProps } from '../common/read-only.ts';

const Time = Type.String({ format: 'date-time' });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
export const TableName = Type.String({ minLength: 1, maxLength: 63, pattern: '^[a-z_][a-z0-9_]{0,62}$', description: 'The data table name: a lower-case identifier, unique within the app' });
const Slug = Type.String({ minLength: 1, maxLength: 100 });
const AppSlug = Type.String({ minLength: 1, maxLength: 100, description: 'The app (slug)' });
const SourceSlug = Type.String({ minLength: 1, maxLength: 100, description: 'The data source (slug)' });
const JsonSchemaDoc = Type.Unknown({ description: 'Frictionless Table Schema (docs/data-tables.md)' });

export const AppParams = Type.Object({ app_slug: AppSlug });
export const SourceParams = Type.Object({ app_slug: AppSlug, ds: SourceSlug });
export const TableParams = Type.Object({ app_slug: AppSlug, name: TableName });
/** The key segment of `…/data/:pk/` (records routes). */
export const RecordKeyParam = { pk: Type.String({ minLength: 1, maxLength: 200, description: 'The primary key value' }) };
export const SourceTableParams = Type.Object({ app_slug: AppSlug, ds: SourceSlug, name: TableName });

export const DataTableListItem = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    datasource_name: Type.String(),
    datasource_slug: Type.String(),
    app_name: Type.String(),
    app_slug: Type.String(),
    physical_table_name: Type.String(),
    is_materialized: Type.Boolean(),
    is_active: Type.Boolean(),
    field_count: Type.Integer(),
    created_at: Time,
    updated_at: Time,
  },
);
export type DataTableListItem = Static<typeof DataTableListItem>;

export const SourceInfo = Type.Object({ id: Type.Integer(), app: Type.String(), table: Type.String(), physical_table_name: Type.String() });

export const DataTableView = Type.Object(
  {
    id: Type.Integer(),
    data_source: Type.Integer(),
    datasource_name: Type.String(),
    datasource_slug: Type.String(),
    app_name: Type.String(),
    app_slug: Type.String(),
    name: Type.String(),
    description: Type.String(),
    json_schema: JsonSchemaDoc,
    physical_table_name: Type.String({ description: 'For a reference: the source table\'s physical table' }),
    is_materialized: Type.Boolean(),
    is_active: Type.Boolean(),
    schema_hash: Type.String(),
    field_count: Type.Integer({ description: 'Number of columns: the declared fields plus the generated `id` when no primaryKey is declared' }),
    field_names: Type.Array(Type.String()),
    primary_key: Type.Array(Type.String()),
    provider_type: Type.String(),
    schema_format: Type.Literal('frictionless'),
    is_reference: Type.Boolean(),
    source_info: Type.Union([SourceInfo, Type.Null()]),
    created_at: Time,
    updated_at: Time,
    created_by: Nullable(Type.String()),
    modified_by: Nullable(Type.String()),
  },
);
export type DataTableView = Static<typeof DataTableView>;

export const DataTableCreate = Type.Object(
  { name: TableName, description: Type.Optional(Type.String({ maxLength: 10_000, description: 'What the table holds' })), json_schema: JsonSchemaDoc },
  { additionalProperties: false },
);
export type DataTableCreate = Static<typeof DataTableCreate>;

export const DataTableUpdate = Type.Object(
  {
    description: Type.Optional(Type.String({ maxLength: 10_000, description: 'What the table holds' })),
    json_schema: Type.Optional(JsonSchemaDoc),
    ...readOnlyProps(DataTableView, [
      'id', 'data_source', 'datasource_slug', 'app_slug', 'name', 'physical_table_name', 'provider_type', 'is_reference', 'source_info', 'created_at', 'created_by',
    ]),
    // Derived from json_schema, or changed by other operations (materialize, delete, renames of the app or source).
    ...readOnlyProps(
      DataTableView,
      ['datasource_name', 'app_name', 'is_materialized', 'is_active', 'schema_hash', 'field_count', 'field_names', 'primary_key', 'schema_format', 'updated_at', 'modified_by'],
      'maintained',
    ),
  },
  {
    additionalProperties: false,
    description: 'Takes the fields GET returns: only description and json_schema change; identifying fields are ignored when unchanged and a 400 when changed, derived ones are ignored.',
  },
);
export type DataTableUpdate = Static<typeof DataTableUpdate>;

export const DataTableListQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 1, description: 'Page number (default 1)' })),
  page_size: Type.Optional(Type.Integer({ minimum: 1, description: 'Tables per page (default 20, at most 100)' })),
  datasource: Type.Optional(Type.String({ description: 'Data source slug' })),
  is_materialized: Type.Optional(Type.Boolean()),
});
export type DataTableListQuery = Static<typeof DataTableListQuery>;

export const SchemaView = Type.Object({ name: Type.String(), schema: JsonSchemaDoc, schema_hash: Type.String(), field_count: Type.Integer() });

export const ValidateDataBody = Type.Object({ data: Type.Array(Type.Unknown(), { maxItems: 10_000 }) }, { additionalProperties: false });
export const ValidateDataResult = Type.Object({ is_valid: Type.Boolean(), errors: Type.Array(Type.String()), validated_rows: Type.Integer() });

export const DataTableStats = Type.Object({
  total_tables: Type.Integer(),
  materialized_tables: Type.Integer(),
  unmaterialized_tables: Type.Integer(),
  datasource_count: Type.Integer(),
  datasources: Type.Record(Type.String(), Type.Object({ name: Type.String(), provider_type: Type.String(), table_count: Type.Integer(), materialized_count: Type.Integer() })),
});
export type DataTableStats = Static<typeof DataTableStats>;

export const ImportReference = Type.Object(
  { source_app_slug: Slug, source_table_name: TableName, reference_name: Type.Optional(TableName) },
  { additionalProperties: false },
);
export type ImportReference = Static<typeof ImportReference>;
export const ImportReferenceBody = Type.Union([ImportReference, Type.Array(Type.Unknown(), { minItems: 1, maxItems: 100 })]);

export const ImportReferenceBulk = Type.Object({
  created: Type.Integer(),
  failed: Type.Integer(),
  references: Type.Array(DataTableView),
  errors: Type.Array(Type.Object({ index: Type.Integer(), reference: Type.Unknown(), error: Type.Unknown() })),
});

export const DATATABLE_MESSAGES = {
  created: 'Data table created.',
  deleted: 'Data table deleted.',
  materialized: 'Data table materialized.',
  referenceCreated: 'Reference table created.',
} as const;
