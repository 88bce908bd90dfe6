import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appOfFlag, dsArg, siteFlag } from '../../apps.ts';

export default class DataSourceGetCommand extends BackendCommand<typeof DataSourceGetCommand> {
  static override summary = 'Show a data source (by slug or id).';
  static override examples = ['<%= config.bin %> datasource get main-store --site shop_prod --app sales-tracker'];
  static override args = { datasource: dsArg };
  static override flags = { site: siteFlag, app: appOfFlag };

  async run() {
    const ds = await (await this.backend()).getDataSource(this.flags.site, this.flags.app, this.args.datasource);
    this.log(keyValues({ ...ds }));
    return ds;
  }
}
