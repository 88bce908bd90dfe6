import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { appFlag, jsonInput, plural, recordLines, siteFlag, tableFlag } from '../../tables.ts';

export default class DataCreateCommand extends BackendCommand<typeof DataCreateCommand> {
  static override summary = 'Create a record, or many (a JSON array: all or nothing).';
  static override examples = [
    `<%= config.bin %> data create --table contacts --data '{"id":100,"first_name":"Ada","last_name":"Lovelace","email":"ada@example.com"}' --site shop_prod --app crm`,
    '<%= config.bin %> data create --table contacts --file new-contacts.json --site shop_prod --app crm --json',
  ];
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    data: Flags.string({ summary: 'The record (a JSON object) or records (a JSON array).', exclusive: ['file'] }),
    file: Flags.string({ summary: 'A JSON file holding the record or the array of records.' }),
  };

  async run() {
    const f = this.flags;
    const backend = await this.backend();
    const body = await backend.createRecords(f.site, f.app, f.table, jsonInput(f.data, f.file));
    if (Array.isArray(body.data)) this.log(`Created ${plural(body.data.length, 'record')}.`);
    else {
      this.log('Record created.');
      if (!this.jsonEnabled()) this.log(recordLines(body.data));
    }
    return body;
  }
}
