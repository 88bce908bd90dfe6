// `platform app …`: a site's apps (/sites/<site>/api/apps/).
import { Args, Flags } from '@oclif/core';
import type { AppDetail, AppListItem, AppStats } from '../../shared/apps/app.schemas.ts';
import type { SettingsView } from '../../shared/apps/app-settings.schemas.ts';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import { DomainError } from '../../shared/errors.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { keyValues, table, when, type Column } from '../output.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { listTable } from '../output.ts';

const appArg = { app: Args.string({ name: 'app', description: 'The app slug', required: true }) };

const COLUMNS: Column<AppListItem>[] = [
  { header: 'Slug', get: (a) => a.slug },
  { header: 'Name', get: (a) => a.name },
  { header: 'Category', get: (a) => a.settings.category },
  { header: 'Active', get: (a) => a.is_active },
  { header: 'Sources', get: (a) => a.datasource_count },
  { header: 'Tables', get: (a) => a.table_count },
  { header: 'Modified', get: (a) => when(a.updated_at) },
];

/** The message and the app without its lists and settings (`app get` shows them). */
function shown(body: CreatedBody<AppDetail>): string[] {
  const { tables: _t, datasources: _d, settings: _s, package_info: _p, ...rest } = body.data;
  return [body.message, keyValues(rest)];
}

export const APP_COMMANDS = {
  'app:list': operation({
    summary: 'List the apps of a site.',
    description: 'Active apps by default; --inactive for the deleted ones, --all for both. Prints {status, message, data, total} with --json.',
    examples: ['app list --site shop_prod', 'app list --site shop_prod --inactive --json'],
    flags: {
      site: siteFlag,
      inactive: Flags.boolean({ summary: 'Only the deleted (inactive) apps.', exclusive: ['all'] }),
      all: Flags.boolean({ summary: 'Active and inactive apps.' }),
    },
    request: ({ flags: f }) => ({ method: 'GET', site: f.site, path: '/api/apps/', query: { is_active: f.all ? 'all' : f.inactive ? 'false' : undefined } }),
    render: (body: { data: AppListItem[] }) => listTable(body.data, COLUMNS, ['app', 'apps']),
  }),

  'app:create': operation({
    summary: 'Create an app (and its settings) in a site.',
    description: 'The slug is made from the name (-2, -3 … when taken).',
    examples: ['app create "Sales Tracker" --site shop_prod', 'app create CRM --description "Customers" --settings \'{"category":"integration"}\' --site shop_prod --json'],
    args: { name: Args.string({ description: 'The app name', required: true }) },
    flags: {
      site: siteFlag,
      description: Flags.string({ summary: 'What the app is for.' }),
      settings: Flags.string({ summary: 'Settings as a JSON object (display_name, category, primary_color, …).' }),
    },
    request: ({ flags: f, args }) => ({
      method: 'POST',
      site: f.site,
      path: '/api/apps/',
      body: { name: args.name, description: f.description, settings: f.settings === undefined ? undefined : parseJson(f.settings, 'settings') },
    }),
    render: shown,
  }),

  'app:get': operation({
    summary: 'Show an app with its data sources, tables and settings.',
    examples: ['app get sales-tracker --site shop_prod', 'app get sales-tracker --site shop_prod --json'],
    args: appArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'GET', site: flags.site, path: path`/api/apps/${args.app}/` }),
    render: (body: CreatedBody<AppDetail>) => keyValues(body.data),
  }),

  'app:update': operation({
    summary: 'Change the name or description of an app (the slug stays).',
    examples: ['app update sales-tracker --name "Sales" --site shop_prod'],
    args: appArg,
    flags: {
      site: siteFlag,
      name: Flags.string({ summary: 'The new name.' }),
      description: Flags.string({ summary: 'The new description.' }),
    },
    request: ({ flags: f, args }) => {
      const body = defined({ name: f.name, description: f.description });
      if (!Object.keys(body).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --name or --description.');
      return { method: 'PATCH', site: f.site, path: path`/api/apps/${args.app}/`, body };
    },
    render: shown,
  }),

  'app:delete': operation({
    summary: 'Delete an app (soft: it, its data sources and tables become inactive).',
    description: '`platform app restore` brings them back.',
    examples: ['app delete sales-tracker --site shop_prod'],
    args: appArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'DELETE', site: flags.site, path: path`/api/apps/${args.app}/` }),
  }),

  'app:restore': operation({
    summary: 'Restore a deleted app with its data sources and tables.',
    examples: ['app restore sales-tracker --site shop_prod'],
    args: appArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'POST', site: flags.site, path: path`/api/apps/${args.app}/restore/` }),
  }),

  'app:settings': operation({
    summary: "Show an app's settings, or change some of them (--set).",
    description: 'With --set, a PATCH of the fields it holds (display_name, category, primary_color, rate_limit_per_hour, max_datatables, …); prints the settings after the change.',
    examples: ['app settings crm --site shop_prod', `app settings crm --set '{"rate_limit_per_hour":500}' --site shop_prod --json`],
    args: appArg,
    flags: { site: siteFlag, set: Flags.string({ summary: 'The settings to change, as a JSON object.' }) },
    request: ({ flags: f, args }) => ({
      method: f.set === undefined ? 'GET' : 'PATCH',
      site: f.site,
      path: path`/api/apps/${args.app}/settings/`,
      body: f.set === undefined ? undefined : parseJson(f.set, 'set'),
    }),
    render: (body: { message: string; data: SettingsView }) => [body.message, keyValues(body.data)],
  }),

  'app:stats': operation({
    summary: 'Count the data sources and tables of an app.',
    examples: ['app stats sales-tracker --site shop_prod'],
    args: appArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'GET', site: flags.site, path: path`/api/apps/${args.app}/stats/` }),
    render: ({ datasources, ...totals }: AppStats) => {
      if (!datasources.length) return keyValues(totals);
      return `${keyValues(totals)}\n\n${table(datasources, [
        { header: 'Slug', get: (d) => d.slug },
        { header: 'Name', get: (d) => d.name },
        { header: 'Provider', get: (d) => d.provider_type },
        { header: 'Tables', get: (d) => d.total_tables },
        { header: 'Materialized', get: (d) => d.materialized_tables },
      ])}`;
    },
  }),
};
