import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appFlag, siteFlag, tableArg, tableSummary } from '../../tables.ts';

export default class TableGetCommand extends BackendCommand<typeof TableGetCommand> {
  static override summary = 'Show a data table (the schema: `platform table schema`; all of it: --json).';
  static override examples = ['<%= config.bin %> table get contacts --site shop_prod --app crm'];
  static override args = { name: tableArg };
  static override flags = { site: siteFlag, app: appFlag };

  async run() {
    const t = await (await this.backend()).getTable(this.flags.site, this.flags.app, this.args.name);
    this.log(keyValues(tableSummary(t)));
    return t;
  }
}
