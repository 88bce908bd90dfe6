import { BackendCommand } from '../../base.ts';
import { appFlag, siteFlag, tableArg } from '../../tables.ts';

export default class TableMaterializeCommand extends BackendCommand<typeof TableMaterializeCommand> {
  static override summary = 'Create the physical table of a data table.';
  static override description = 'Foreign-key targets must be materialized first.';
  static override examples = ['<%= config.bin %> table materialize contacts --site shop_prod --app crm'];
  static override args = { name: tableArg };
  static override flags = { site: siteFlag, app: appFlag };

  async run() {
    const body = await (await this.backend()).materializeTable(this.flags.site, this.flags.app, this.args.name);
    this.log(`${body.message} (${body.data.name} → ${body.data.physical_table_name})`);
    return body;
  }
}
