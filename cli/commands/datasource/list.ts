import { BackendCommand } from '../../base.ts';
import { appOfFlag, DATASOURCE_COLUMNS, listTable, siteFlag } from '../../apps.ts';

export default class DataSourceListCommand extends BackendCommand<typeof DataSourceListCommand> {
  static override summary = 'List the data sources of an app.';
  static override examples = ['<%= config.bin %> datasource list --site shop_prod --app sales-tracker'];
  static override flags = { site: siteFlag, app: appOfFlag };

  async run() {
    const body = await (await this.backend()).listDataSources(this.flags.site, this.flags.app);
    this.log(listTable(body.data, DATASOURCE_COLUMNS, ['data source', 'data sources']));
    return body;
  }
}
