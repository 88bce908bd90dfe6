import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { appFlag, jsonInput, recordLines, siteFlag, tableFlag } from '../../tables.ts';

export default class DataUpsertCommand extends BackendCommand<typeof DataUpsertCommand> {
  static override summary = 'Create a record, or update the one with the same values of --unique-fields.';
  static override examples = [
    `<%= config.bin %> data upsert --table contacts --unique-fields email --data '{"id":7,"first_name":"Ada","last_name":"Sato","email":"ada@example.com"}' --site shop_prod --app crm`,
  ];
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    'unique-fields': Flags.string({ summary: 'The fields that identify the record: a,b.', required: true }),
    data: Flags.string({ summary: 'The record (a JSON object).', exclusive: ['file'] }),
    file: Flags.string({ summary: 'A JSON file holding the record.' }),
  };

  async run() {
    const f = this.flags;
    const backend = await this.backend();
    const body = await backend.upsertRecord(f.site, f.app, f.table, jsonInput(f.data, f.file), f['unique-fields']);
    this.log(body.created ? 'Record created.' : 'Record updated.');
    if (!this.jsonEnabled()) this.log(recordLines(body.data));
    return body;
  }
}
