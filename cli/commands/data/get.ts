import { Args, Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { appFlag, recordLines, recordQuery, siteFlag, tableFlag } from '../../tables.ts';

export default class DataGetCommand extends BackendCommand<typeof DataGetCommand> {
  static override summary = 'Show one record by its primary key.';
  static override examples = ['<%= config.bin %> data get 7 --table contacts --site shop_prod --app crm', '<%= config.bin %> data get 7 --table contacts --populate company_id --site shop_prod --app crm --json'];
  static override args = { id: Args.string({ description: 'The primary key value', required: true }) };
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    populate: Flags.string({ summary: 'Related records to include: a,b or *.' }),
  };

  async run() {
    const f = this.flags;
    const backend = await this.backend();
    const body = await backend.getRecord(f.site, f.app, f.table, this.args.id, recordQuery([], { populate: f.populate }));
    if (!this.jsonEnabled()) this.log(recordLines(body.data));
    return body;
  }
}
