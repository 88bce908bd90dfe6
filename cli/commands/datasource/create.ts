import { Args, Flags } from '@oclif/core';
import { PROVIDER_TYPES, type DataSourceCreate } from '../../../shared/apps/datasource.schemas.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appOfFlag, parseJson, siteFlag } from '../../apps.ts';

export default class DataSourceCreateCommand extends BackendCommand<typeof DataSourceCreateCommand> {
  static override summary = 'Create a data source in an app.';
  static override description = 'Without --slug, one is made from the name.';
  static override examples = ['<%= config.bin %> datasource create "Main store" --provider flat_table --site shop_prod --app sales-tracker'];
  static override args = { name: Args.string({ description: 'The data source name', required: true }) };
  static override flags = {
    site: siteFlag,
    app: appOfFlag,
    provider: Flags.string({ summary: 'How its tables are stored.', options: [...PROVIDER_TYPES], required: true }),
    slug: Flags.string({ summary: 'The slug (lowercase, hyphens); unique in the app.' }),
    config: Flags.string({ summary: 'provider_config as a JSON object.' }),
    description: Flags.string({ summary: 'What it holds.' }),
  };

  async run() {
    const f = this.flags;
    const input: DataSourceCreate = { name: this.args.name, provider_type: f.provider as DataSourceCreate['provider_type'] };
    if (f.slug !== undefined) input.slug = f.slug;
    if (f.config !== undefined) input.provider_config = parseJson(f.config, 'provider_config') as Record<string, unknown>;
    if (f.description !== undefined) input.description = f.description;
    const body = await (await this.backend()).createDataSource(f.site, f.app, input);
    this.log(body.message);
    this.log(keyValues({ ...body.data }));
    return body;
  }
}
