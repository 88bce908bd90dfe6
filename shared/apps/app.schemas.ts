// Apps of a site (spec Part 2 §2 App): containers of data sources and data tables.
import { Type, type Static } from '@sinclair/typebox';
import { readOnlyProps } from '../common/read-only.ts';
import { BOOL_PARAM_VALUES } from '../common/filters.ts';
import { StringEnum } from '../common/validation.ts';
import { SettingsDetail, SettingsLight, SettingsPatch } from './app-settings.schemas.ts';

export const AppSlugParam = Type.String({ minLength: 1, maxLength: 100, description: 'The app slug' });
export const AppRef = Type.Object({ app_slug: AppSlugParam });

const Time = Type.String({ format: 'date-time' });
const Uuid = Type.Union([Type.String({ format: 'uuid' }), Type.Null()], { description: 'UUID of the site user (site users have UUIDs, not integer ids)' });

const base = {
  id: Type.Integer(),
  name: Type.String(),
  slug: Type.String(),
  description: Type.String(),
  is_active: Type.Boolean(),
  table_count: Type.Integer(),
  datasource_count: Type.Integer(),
  created_at: Time,
  updated_at: Time,
  created_by: Uuid,
  modified_by: Uuid,
};

export const AppListItem = Type.Object({ ...base, settings: SettingsLight });
export type AppListItem = Static<typeof AppListItem>;

export const AppDetail = Type.Object(
  {
    ...base,
    tables: Type.Array(Type.Object({ id: Type.Integer(), name: Type.String(), provider_type: Type.String(), is_materialized: Type.Boolean(), physical_table_name: Type.String() })),
    datasources: Type.Array(Type.Object({ id: Type.Integer(), name: Type.String(), slug: Type.String(), provider_type: Type.String(), table_count: Type.Integer() })),
    settings: SettingsDetail,
    package_info: Type.Object({ has_package: Type.Boolean(), generated_at: Type.Union([Type.String(), Type.Null()]), download_url: Type.Union([Type.String(), Type.Null()]) }),
  },
);
export type AppDetail = Static<typeof AppDetail>;

export const AppCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255, description: 'The app name (the slug is made from it)' }),
    description: Type.Optional(Type.String({ maxLength: 10_000, description: 'What the app is for' })),
    settings: Type.Optional({ ...SettingsPatch, description: 'Settings as a JSON object (display_name, category, primary_color, …)' }),
  },
  { additionalProperties: false },
);
export type AppCreate = Static<typeof AppCreate>;

export const AppUpdate = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    ...readOnlyProps(AppDetail, ['id', 'slug', 'created_at', 'created_by']),
    // Changed by other routes (delete/restore, tables, data sources, settings): never by this PUT, whatever is sent.
    ...readOnlyProps(AppDetail, ['is_active', 'table_count', 'datasource_count', 'updated_at', 'modified_by', 'tables', 'datasources', 'settings', 'package_info'], 'maintained'),
  },
  { additionalProperties: false, description: 'Takes the fields GET returns; only name and description change (settings: /settings/; the slug stays). Identifying fields are ignored when unchanged (a 400 when changed); counts, timestamps, settings and the other derived fields are ignored.' },
);
export type AppUpdate = Static<typeof AppUpdate>;

export const AppListQuery = Type.Object({
  is_active: Type.Optional(StringEnum(BOOL_PARAM_VALUES, { description: 'Default true; all or * for both' })),
});
export type AppListQuery = Static<typeof AppListQuery>;

export const AppStats = Type.Object({
  app_name: Type.String(),
  app_slug: Type.String(),
  total_datasources: Type.Integer(),
  total_tables: Type.Integer(),
  materialized_tables: Type.Integer(),
  unmaterialized_tables: Type.Integer(),
  datasources: Type.Array(Type.Object({ name: Type.String(), slug: Type.String(), provider_type: Type.String(), total_tables: Type.Integer(), materialized_tables: Type.Integer() })),
});
export type AppStats = Static<typeof AppStats>;

export const AppListBody = Type.Object({ status: Type.Literal('success'), message: Type.String(), data: Type.Array(AppListItem), total: Type.Integer() });
export const AppDetailBody = Type.Object({ status: Type.Literal('success'), message: Type.String(), data: AppDetail });
