import { Args, Flags } from '@oclif/core';
import { fieldError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import { appFlag, jsonInput, plural, recordLines, siteFlag, tableFlag } from '../../tables.ts';

export default class DataUpdateCommand extends BackendCommand<typeof DataUpdateCommand> {
  static override summary = 'Change some fields of a record (PATCH), or of many records.';
  static override description = 'With an ID: --data is an object of the fields to change. Without: a JSON array (--data or --file) of objects, each carrying its primary key, all changed in one request.';
  static override examples = [
    `<%= config.bin %> data update 7 --table contacts --data '{"status":"inactive"}' --site shop_prod --app crm`,
    '<%= config.bin %> data update --table contacts --file changes.json --site shop_prod --app crm',
  ];
  static override args = { id: Args.string({ description: 'The primary key value (omit for an array of records)' }) };
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    data: Flags.string({ summary: 'The fields to change (a JSON object), or an array of records with their keys.', exclusive: ['file'] }),
    file: Flags.string({ summary: 'A JSON file holding the object or the array.' }),
  };

  async run() {
    const f = this.flags;
    const input = jsonInput(f.data, f.file);
    const backend = await this.backend();
    if (this.args.id !== undefined) {
      if (typeof input !== 'object' || input === null || Array.isArray(input)) throw fieldError(f.data !== undefined ? 'data' : 'file', 'Expected a JSON object of the fields to change.');
      const body = await backend.patchRecord(f.site, f.app, f.table, this.args.id, input);
      if (!this.jsonEnabled()) this.log(recordLines(body.data));
      return body;
    }
    if (!Array.isArray(input)) throw fieldError(f.data !== undefined ? 'data' : 'file', 'Without an ID, expected a JSON array of records, each with its primary key.');
    const body = await backend.patchRecords(f.site, f.app, f.table, input);
    this.log(`Updated ${plural(body.data.length, 'record')}.`);
    return body;
  }
}
