// `platform datasource …`: the data sources of an app (/sites/<site>/api/apps/<app>/datasources/).
import { Args, Flags } from '@oclif/core';
import type { DataSourceView } from '../../shared/apps/datasource.schemas.ts';
import { PROVIDER_TYPES } from '../../shared/apps/provider-types.ts';
import { DomainError } from '../../shared/errors.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { type Column } from '../output.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { listTable } from '../output.ts';

const dsArg = { datasource: Args.string({ name: 'datasource', description: 'The data source slug or id', required: true }) };
const dsFlags = { site: siteFlag, app: Flags.string({ summary: 'The app (slug) the data source belongs to.', required: true }) };
const config = (text: string | undefined) => (text === undefined ? undefined : parseJson(text, 'provider_config'));

const COLUMNS: Column<DataSourceView>[] = [
  { header: 'Id', get: (d) => d.id },
  { header: 'Slug', get: (d) => d.slug },
  { header: 'Name', get: (d) => d.name },
  { header: 'Provider', get: (d) => d.provider_type },
  { header: 'Tables', get: (d) => d.table_count },
  { header: 'Materialized', get: (d) => d.materialized_count },
  { header: 'Description', get: (d) => d.description },
];

export const DATASOURCE_COMMANDS = {
  'datasource:list': operation({
    summary: 'List the data sources of an app.',
    examples: ['datasource list --site shop_prod --app sales-tracker'],
    flags: dsFlags,
    request: ({ flags }) => ({ method: 'GET', site: flags.site, path: path`/api/apps/${flags.app}/datasources/` }),
    render: (body: { data: DataSourceView[] }) => listTable(body.data, COLUMNS, ['data source', 'data sources']),
  }),

  'datasource:create': operation({
    summary: 'Create a data source in an app.',
    description: 'Without --slug, one is made from the name.',
    examples: ['datasource create "Main store" --provider flat_table --site shop_prod --app sales-tracker'],
    args: { name: Args.string({ description: 'The data source name', required: true }) },
    flags: {
      ...dsFlags,
      provider: Flags.string({ summary: 'How its tables are stored.', options: [...PROVIDER_TYPES], required: true }),
      slug: Flags.string({ summary: 'The slug (lowercase, hyphens); unique in the app.' }),
      config: Flags.string({ summary: 'provider_config as a JSON object.' }),
      description: Flags.string({ summary: 'What it holds.' }),
    },
    request: ({ flags: f, args }) => ({
      method: 'POST',
      site: f.site,
      path: path`/api/apps/${f.app}/datasources/`,
      body: { name: args.name, provider_type: f.provider, slug: f.slug, provider_config: config(f.config), description: f.description },
    }),
  }),

  'datasource:get': operation({
    summary: 'Show a data source (by slug or id).',
    examples: ['datasource get main-store --site shop_prod --app sales-tracker'],
    args: dsArg,
    flags: dsFlags,
    request: ({ flags, args }) => ({ method: 'GET', site: flags.site, path: path`/api/apps/${flags.app}/datasources/${args.datasource}/` }),
  }),

  'datasource:update': operation({
    summary: 'Change a data source (the provider type stays).',
    description:
      '--allow-data-loss lets schema migrations of its tables run unsafe operations (drop a type\'s precision, make a field required, …: docs/migrations.md); --no-allow-data-loss takes that back. Both keep the rest of provider_config.',
    examples: ['datasource update main-store --name "Store" --site shop_prod --app sales-tracker', 'datasource update main-store --allow-data-loss --site shop_prod --app sales-tracker'],
    args: dsArg,
    flags: {
      ...dsFlags,
      name: Flags.string({ summary: 'The new name.' }),
      slug: Flags.string({ summary: 'The new slug.' }),
      config: Flags.string({ summary: 'provider_config as a JSON object (replaces it).' }),
      'allow-data-loss': Flags.boolean({ summary: 'Set provider_config.allow_data_loss (unsafe schema migrations run).', allowNo: true, exclusive: ['config'] }),
      description: Flags.string({ summary: 'The new description.' }),
    },
    request: async ({ flags: f, args, call }) => {
      const at = path`/api/apps/${f.app}/datasources/${args.datasource}/`;
      let providerConfig = config(f.config);
      if (f['allow-data-loss'] !== undefined) {
        const current = await call<DataSourceView>({ method: 'GET', site: f.site, path: at });
        providerConfig = { ...current.provider_config, allow_data_loss: f['allow-data-loss'] };
      }
      const body = defined({ name: f.name, slug: f.slug, provider_config: providerConfig, description: f.description });
      if (!Object.keys(body).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --name, --slug, --config, --allow-data-loss or --description.');
      return { method: 'PATCH', site: f.site, path: at, body };
    },
  }),

  'datasource:delete': operation({
    summary: 'Delete a data source that has no tables.',
    examples: ['datasource delete main-store --site shop_prod --app sales-tracker'],
    args: dsArg,
    flags: dsFlags,
    request: ({ flags, args }) => ({ method: 'DELETE', site: flags.site, path: path`/api/apps/${flags.app}/datasources/${args.datasource}/` }),
  }),
};
