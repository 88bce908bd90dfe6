// Shared pieces of the `app` and `datasource` commands: flags, arguments, tables.
import { Args, Flags } from '@oclif/core';
import type { AppListItem } from '../shared/apps/app.schemas.ts';
import type { DataSourceView } from '../shared/apps/datasource.schemas.ts';
import { type Column, table, when } from './output.ts';
export { siteFlag, parseJson } from './secrets.ts';

export const appArg = Args.string({ name: 'app', description: 'The app slug', required: true });
export const dsArg = Args.string({ name: 'datasource', description: 'The data source slug or id', required: true });
export const appOfFlag = Flags.string({ summary: 'The app (slug) the data source belongs to.', required: true });

export const APP_COLUMNS: Column<AppListItem>[] = [
  { header: 'Slug', get: (a) => a.slug },
  { header: 'Name', get: (a) => a.name },
  { header: 'Category', get: (a) => a.settings.category },
  { header: 'Active', get: (a) => a.is_active },
  { header: 'Sources', get: (a) => a.datasource_count },
  { header: 'Tables', get: (a) => a.table_count },
  { header: 'Modified', get: (a) => when(a.updated_at) },
];

export const DATASOURCE_COLUMNS: Column<DataSourceView>[] = [
  { header: 'Id', get: (d) => d.id },
  { header: 'Slug', get: (d) => d.slug },
  { header: 'Name', get: (d) => d.name },
  { header: 'Provider', get: (d) => d.provider_type },
  { header: 'Tables', get: (d) => d.table_count },
  { header: 'Materialized', get: (d) => d.materialized_count },
  { header: 'Description', get: (d) => d.description },
];

/** A list as a table with a count footer (`[one, many]` names the items). */
export function listTable<T>(rows: T[], columns: Column<T>[], [one, many]: [string, string]): string {
  const footer = `${rows.length} ${rows.length === 1 ? one : many}`;
  return rows.length ? `${table(rows, columns)}\n\n${footer}` : footer;
}
