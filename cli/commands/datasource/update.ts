import { Flags } from '@oclif/core';
import type { DataSourceUpdate } from '../../../shared/apps/datasource.schemas.ts';
import { DomainError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appOfFlag, dsArg, parseJson, siteFlag } from '../../apps.ts';

export default class DataSourceUpdateCommand extends BackendCommand<typeof DataSourceUpdateCommand> {
  static override summary = 'Change a data source (the provider type stays).';
  static override examples = ['<%= config.bin %> datasource update main-store --name "Store" --site shop_prod --app sales-tracker'];
  static override args = { datasource: dsArg };
  static override flags = {
    site: siteFlag,
    app: appOfFlag,
    name: Flags.string({ summary: 'The new name.' }),
    slug: Flags.string({ summary: 'The new slug.' }),
    config: Flags.string({ summary: 'provider_config as a JSON object (replaces it).' }),
    description: Flags.string({ summary: 'The new description.' }),
  };

  async run() {
    const f = this.flags;
    const input: DataSourceUpdate = {};
    if (f.name !== undefined) input.name = f.name;
    if (f.slug !== undefined) input.slug = f.slug;
    if (f.config !== undefined) input.provider_config = parseJson(f.config, 'provider_config') as Record<string, unknown>;
    if (f.description !== undefined) input.description = f.description;
    if (!Object.keys(input).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --name, --slug, --config or --description.');
    const ds = await (await this.backend()).updateDataSource(f.site, f.app, this.args.datasource, input);
    this.log(keyValues({ ...ds }));
    return ds;
  }
}
