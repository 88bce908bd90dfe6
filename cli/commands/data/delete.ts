import { Args, Flags } from '@oclif/core';
import { messageBody } from '../../../shared/common/envelopes.ts';
import { DomainError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import { appFlag, jsonObject, plural, siteFlag, tableFlag } from '../../tables.ts';

export default class DataDeleteCommand extends BackendCommand<typeof DataDeleteCommand> {
  static override summary = 'Delete a record by key, records by --ids, or the records matching --filter-json.';
  static override description = 'With an ID, --json prints {status, message} (the API answers 204); with --ids, {deleted, ids}; with --filter-json, {deleted}. An empty filter is refused.';
  static override examples = [
    '<%= config.bin %> data delete 7 --table contacts --site shop_prod --app crm',
    '<%= config.bin %> data delete --ids 7,8,9 --table contacts --site shop_prod --app crm',
    `<%= config.bin %> data delete --filter-json '{"status":"inactive"}' --table contacts --site shop_prod --app crm --json`,
  ];
  static override args = { id: Args.string({ description: 'The primary key value' }) };
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    ids: Flags.string({ summary: 'Primary key values: a,b,c.', exclusive: ['filter-json'] }),
    'filter-json': Flags.string({ summary: 'The conditions as a JSON object: {"age__gte":30}.' }),
  };

  async run() {
    const f = this.flags;
    const given = [this.args.id !== undefined, f.ids !== undefined, f['filter-json'] !== undefined].filter(Boolean).length;
    if (given !== 1) throw new DomainError('BAD_REQUEST', 'Give exactly one of: an ID, --ids a,b or --filter-json JSON.');
    const backend = await this.backend();
    if (this.args.id !== undefined) {
      await backend.deleteRecord(f.site, f.app, f.table, this.args.id);
      const body = messageBody(`Record ${this.args.id} deleted.`);
      this.log(body.message);
      return body;
    }
    const query = f.ids !== undefined ? { ids: f.ids } : { filter: JSON.stringify(jsonObject(f['filter-json']!, 'filter-json')) };
    const body = await backend.deleteRecords(f.site, f.app, f.table, query);
    this.log(`Deleted ${plural(body.deleted, 'record')}.`);
    return body;
  }
}
