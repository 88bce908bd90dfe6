import { Flags } from '@oclif/core';
import type { DataTableCreate } from '../../../shared/data/datatable.schemas.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appFlag, readJson, siteFlag, tableNameOf, tableSummary } from '../../tables.ts';

export default class TableCreateCommand extends BackendCommand<typeof TableCreateCommand> {
  static override summary = 'Create a data table from a Frictionless Table Schema file.';
  static override description = 'Without --name, the name is the file name up to its first dot (contacts.json → contacts, events.jsonb.json → events). The table is not materialized: `platform table materialize` creates the physical table.';
  static override examples = [
    '<%= config.bin %> table create --site shop_prod --app crm --datasource main --name contacts --schema fixtures/schemas/contacts.json',
    '<%= config.bin %> table create --site shop_prod --app crm --datasource events --schema fixtures/schemas/events.jsonb.json --json',
  ];
  static override flags = {
    site: siteFlag,
    app: appFlag,
    datasource: Flags.string({ summary: 'The data source (slug) the table goes into.', required: true }),
    name: Flags.string({ summary: 'The table name (lower-case identifier); default: from the schema file name.' }),
    schema: Flags.string({ summary: 'The Table Schema, a JSON file.', required: true }),
    description: Flags.string({ summary: 'What the table holds.' }),
  };

  async run() {
    const f = this.flags;
    const input: DataTableCreate = { name: f.name ?? tableNameOf(f.schema), json_schema: readJson(f.schema, 'schema') };
    if (f.description !== undefined) input.description = f.description;
    const body = await (await this.backend()).createTable(f.site, f.app, f.datasource, input);
    this.log(body.message);
    this.log(keyValues(tableSummary(body.data)));
    return body;
  }
}
