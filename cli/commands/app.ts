// `platform app …`: a site's apps (/sites/<site>/api/apps/).
import { Args, Flags } from '@oclif/core';
import type { AppDetail, AppListItem, AppStats } from '../../shared/apps/app.schemas.ts';
import type { SettingsView } from '../../shared/apps/app-settings.schemas.ts';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import { path } from '../api.ts';
import { api, operation } from '../base.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { columns, keyValues, listOf, table } from '../output.ts';

/** The message and the app without its lists and settings (`app get` shows them). */
function shown(body: CreatedBody<AppDetail>): string[] {
  const { tables: _t, datasources: _d, settings: _s, package_info: _p, ...rest } = body.data;
  return [body.message, keyValues(rest)];
}

export const APP_COMMANDS = {
  'app:list': api('apps_list', {
    examples: ['app list --site shop_prod', 'app list --site shop_prod --inactive --json'],
    rename: { is_active: false },
    flags: { inactive: Flags.boolean({ summary: 'Only the deleted (inactive) apps.', exclusive: ['all'] }), all: Flags.boolean({ summary: 'Active and inactive apps.' }) },
    query: ({ flags: f }) => ({ is_active: f.all ? 'all' : f.inactive ? 'false' : undefined }),
    render: listOf<AppListItem>(['app', 'apps'], 'slug name settings.category:category is_active:active datasource_count:sources table_count:tables updated_at:modified'),
  }),
  'app:create': api('apps_create', { args: ['name'], examples: ['app create CRM --description "Customers" --settings \'{"category":"integration"}\' --site shop_prod'], render: shown }),
  'app:get': api('apps_retrieve', { args: ['app_slug'], examples: ['app get sales-tracker --site shop_prod --json'], render: (body: CreatedBody<AppDetail>) => keyValues(body.data) }),
  'app:update': api('apps_partial_update', { args: ['app_slug'], examples: ['app update sales-tracker --name "Sales" --site shop_prod'], render: shown }),
  'app:delete': api('apps_destroy', { args: ['app_slug'], examples: ['app delete sales-tracker --site shop_prod'] }),
  'app:restore': api('apps_restore', { args: ['app_slug'], examples: ['app restore sales-tracker --site shop_prod'] }),
  // One command for two routes: GET, or PATCH with --set.
  'app:settings': operation({
    summary: "Show an app's settings, or change some of them (--set).",
    description: 'With --set, a PATCH of the fields it holds (display_name, category, primary_color, rate_limit_per_hour, max_datatables, …); prints the settings after the change.',
    examples: ['app settings crm --site shop_prod', `app settings crm --set '{"rate_limit_per_hour":500}' --site shop_prod --json`],
    args: { app: Args.string({ description: 'The app slug', required: true }) },
    flags: { site: siteFlag, set: Flags.string({ summary: 'The settings to change, as a JSON object.' }) },
    request: ({ flags: f, args }) => ({ method: f.set === undefined ? 'GET' : 'PATCH', site: f.site, path: path`/api/apps/${args.app}/settings/`, body: f.set === undefined ? undefined : parseJson(f.set, 'set') }),
    render: (body: { message: string; data: SettingsView }) => [body.message, keyValues(body.data)],
  }),
  'app:stats': api('apps_stats', {
    args: ['app_slug'],
    examples: ['app stats sales-tracker --site shop_prod'],
    render: ({ datasources, ...totals }: AppStats) =>
      datasources.length ? `${keyValues(totals)}\n\n${table(datasources, columns('slug name provider_type:provider total_tables:tables materialized_tables:materialized'))}` : keyValues(totals),
  }),
};
