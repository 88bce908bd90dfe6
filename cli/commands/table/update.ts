import { Flags } from '@oclif/core';
import type { DataTableUpdate } from '../../../shared/data/datatable.schemas.ts';
import { DomainError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appFlag, readJson, siteFlag, tableArg, tableSummary } from '../../tables.ts';

export default class TableUpdateCommand extends BackendCommand<typeof TableUpdateCommand> {
  static override summary = 'Change the description or the schema of a data table (PATCH).';
  static override description = 'A changed schema is accepted while the table is not materialized (409 afterwards).';
  static override examples = [
    '<%= config.bin %> table update contacts --description "People" --site shop_prod --app crm',
    '<%= config.bin %> table update contacts --schema contacts-v2.json --site shop_prod --app crm',
  ];
  static override args = { name: tableArg };
  static override flags = {
    site: siteFlag,
    app: appFlag,
    description: Flags.string({ summary: 'The new description.' }),
    schema: Flags.string({ summary: 'The new Table Schema, a JSON file.' }),
  };

  async run() {
    const f = this.flags;
    const input: DataTableUpdate = {};
    if (f.description !== undefined) input.description = f.description;
    if (f.schema !== undefined) input.json_schema = readJson(f.schema, 'schema');
    if (!Object.keys(input).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --description or --schema.');
    const t = await (await this.backend()).updateTable(f.site, f.app, this.args.name, input);
    this.log(keyValues(tableSummary(t)));
    return t;
  }
}
