import { BackendCommand } from '../../base.ts';
import { appFlag, siteFlag, tableArg } from '../../tables.ts';

export default class TableSchemaCommand extends BackendCommand<typeof TableSchemaCommand> {
  static override summary = 'Print the Table Schema of a data table (and its hash with --json).';
  static override description = 'Without --json, the schema document alone, as JSON: `platform table schema contacts … > contacts.json` gives a file `table create` and `table update` accept.';
  static override examples = ['<%= config.bin %> table schema contacts --site shop_prod --app crm > contacts.json'];
  static override args = { name: tableArg };
  static override flags = { site: siteFlag, app: appFlag };

  async run() {
    const body = await (await this.backend()).tableSchema(this.flags.site, this.flags.app, this.args.name);
    this.log(JSON.stringify(body.schema, null, 2));
    return body;
  }
}
