import { BackendCommand } from '../../base.ts';
import { appFlag, siteFlag, tableArg } from '../../tables.ts';

export default class TableDeleteCommand extends BackendCommand<typeof TableDeleteCommand> {
  static override summary = 'Delete a data table (and drop its physical table with its records).';
  static override description = 'Refused while a foreign key of another table, or a reference table, points at it.';
  static override examples = ['<%= config.bin %> table delete contacts --site shop_prod --app crm'];
  static override args = { name: tableArg };
  static override flags = { site: siteFlag, app: appFlag };

  async run() {
    const body = await (await this.backend()).deleteTable(this.flags.site, this.flags.app, this.args.name);
    this.log(body.message);
    return body;
  }
}
