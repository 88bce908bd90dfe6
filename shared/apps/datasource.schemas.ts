// Data sources of an app (spec Part 2 §2 Data source): how its tables are stored.
import { Type, type Static } from '@sinclair/typebox';
import { readOnlyProps } from '../common/read-only.ts';
import { StringEnum } from '../common/validation.ts';
import { PROVIDER_TYPES } from './provider-types.ts';

export { PROVIDER_TYPES };

const Slug = Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9]+(?:-[a-z0-9]+)*$', description: 'Lowercase letters and digits joined by hyphens' });
const Time = Type.String({ format: 'date-time' });
const Uuid = Type.Union([Type.String({ format: 'uuid' }), Type.Null()]);

export const DataSourceRef = Type.Object({ app_slug: Type.String({ minLength: 1, maxLength: 100, description: 'The app slug' }), ds: Type.String({ minLength: 1, maxLength: 100, description: 'Slug or id' }) });
export const DataSourceView = Type.Object(
  {
    id: Type.Integer(),
    app: Type.Integer(),
    app_name: Type.String(),
    app_slug: Type.String(),
    name: Type.String(),
    slug: Type.String(),
    provider_type: StringEnum(PROVIDER_TYPES),
    provider_config: Type.Record(Type.String(), Type.Unknown()),
    description: Type.String(),
    is_active: Type.Boolean(),
    table_count: Type.Integer(),
    materialized_count: Type.Integer(),
    created_at: Time,
    updated_at: Time,
    created_by: Uuid,
    modified_by: Uuid,
  },
);
export type DataSourceView = Static<typeof DataSourceView>;

export const DataSourceCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255, description: 'The data source name' }),
    slug: Type.Optional(Slug),
    provider_type: StringEnum(PROVIDER_TYPES, { description: 'How its tables are stored' }),
    provider_config: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'Provider settings as a JSON object (`allow_data_loss`: docs/migrations.md)' })),
    description: Type.Optional(Type.String({ maxLength: 10_000, description: 'What it holds' })),
  },
  { additionalProperties: false },
);
export type DataSourceCreate = Static<typeof DataSourceCreate>;

export const DataSourceUpdate = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    slug: Type.Optional(Slug),
    provider_config: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    is_active: Type.Optional(Type.Boolean()),
    ...readOnlyProps(DataSourceView, ['id', 'app', 'app_slug', 'provider_type', 'created_at', 'created_by']),
    ...readOnlyProps(DataSourceView, ['app_name', 'table_count', 'materialized_count', 'updated_at', 'modified_by'], 'maintained'),
  },
  { additionalProperties: false, description: 'Takes the fields GET returns: identifying ones (provider_type cannot change once created) are ignored when unchanged (a 400 when changed); counts and timestamps are ignored.' },
);
export type DataSourceUpdate = Static<typeof DataSourceUpdate>;

export const DataSourceStats = Type.Object({
  total_tables: Type.Integer(),
  materialized_tables: Type.Integer(),
  unmaterialized_tables: Type.Integer(),
  provider_type: Type.String(),
  is_active: Type.Boolean(),
});
export type DataSourceStats = Static<typeof DataSourceStats>;
