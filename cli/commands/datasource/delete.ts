import { BackendCommand } from '../../base.ts';
import { appOfFlag, dsArg, siteFlag } from '../../apps.ts';

export default class DataSourceDeleteCommand extends BackendCommand<typeof DataSourceDeleteCommand> {
  static override summary = 'Delete a data source that has no tables.';
  static override examples = ['<%= config.bin %> datasource delete main-store --site shop_prod --app sales-tracker'];
  static override args = { datasource: dsArg };
  static override flags = { site: siteFlag, app: appOfFlag };

  async run() {
    const body = await (await this.backend()).deleteDataSource(this.flags.site, this.flags.app, this.args.datasource);
    this.log(body.message);
    return body;
  }
}
