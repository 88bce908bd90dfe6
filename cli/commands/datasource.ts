// `platform datasource …`: the data sources of an app (/sites/<site>/api/apps/<app>/datasources/).
import { Flags } from '@oclif/core';
import type { DataSourceView } from '../../shared/apps/datasource.schemas.ts';
import { path } from '../api.ts';
import { api } from '../base.ts';
import { listOf } from '../output.ts';

export const DATASOURCE_COMMANDS = {
  'datasource:list': api('datasources_list', {
    examples: ['datasource list --site shop_prod --app sales-tracker'],
    render: listOf<DataSourceView>(['data source', 'data sources'], 'id slug name provider_type:provider table_count:tables materialized_count:materialized description'),
  }),
  'datasource:create': api('datasources_create', {
    args: ['name'],
    rename: { provider_type: 'provider', provider_config: 'config' },
    examples: ['datasource create "Main store" --provider flat_table --site shop_prod --app sales-tracker'],
  }),
  'datasource:get': api('datasources_retrieve', { args: ['ds'], examples: ['datasource get main-store --site shop_prod --app sales-tracker'] }),
  // --allow-data-loss changes one key of provider_config: a read of the rest first.
  'datasource:update': api('datasources_partial_update', {
    args: ['ds'],
    rename: { provider_config: 'config' },
    flags: { 'allow-data-loss': Flags.boolean({ summary: 'Set provider_config.allow_data_loss (unsafe schema migrations run), keeping the rest of it.', allowNo: true, exclusive: ['config'] }) },
    body: async ({ flags: f, args, call }) => {
      if (f['allow-data-loss'] === undefined) return {};
      const ds = await call<DataSourceView>({ method: 'GET', site: f.site, path: path`/api/apps/${f.app}/datasources/${args.ds}/` });
      return { provider_config: { ...ds.provider_config, allow_data_loss: f['allow-data-loss'] } };
    },
    examples: ['datasource update main-store --name "Store" --site shop_prod --app sales-tracker', 'datasource update main-store --allow-data-loss --site shop_prod --app sales-tracker'],
  }),
  'datasource:stats': api('datasources_stats', { args: ['ds'], examples: ['datasource stats main-store --site shop_prod --app sales-tracker'] }),
  'datasource:delete': api('datasources_destroy', { args: ['ds'], examples: ['datasource delete main-store --site shop_prod --app sales-tracker'] }),
};
