import { Flags } from '@oclif/core';
import { fieldError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import { appFlag, plural, readJson, siteFlag, tableArg } from '../../tables.ts';

export default class TableValidateCommand extends BackendCommand<typeof TableValidateCommand> {
  static override summary = 'Check records (a JSON file) against the schema of a data table; nothing is stored.';
  static override description = 'The file holds an array of records (or one record). Exit code 1 when a record is invalid.';
  static override examples = ['<%= config.bin %> table validate contacts --file records.json --site shop_prod --app crm'];
  static override args = { name: tableArg };
  static override flags = {
    site: siteFlag,
    app: appFlag,
    file: Flags.string({ summary: 'The records: a JSON array of objects (or one object).', required: true }),
  };

  async run() {
    const f = this.flags;
    const data = readJson(f.file, 'file');
    if (typeof data !== 'object' || data === null) throw fieldError('file', 'Expected a JSON array of records (or one record).');
    const result = await (await this.backend()).validateTableData(f.site, f.app, this.args.name, Array.isArray(data) ? data : [data]);
    if (result.is_valid) this.log(`Valid: ${plural(result.validated_rows, 'record')}.`);
    else {
      this.log(`Invalid: ${plural(result.errors.length, 'problem')} in ${plural(result.validated_rows, 'record')}.`);
      for (const e of result.errors) this.log(`  ${e}`);
      process.exitCode = 1;
    }
    return result;
  }
}
