import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { pageFlags } from '../../flags.ts';
import { pageTable } from '../../output.ts';
import { appFlag, siteFlag, TABLE_COLUMNS } from '../../tables.ts';
import type { TableListParams } from '../../backend/types.ts';

export default class TableListCommand extends BackendCommand<typeof TableListCommand> {
  static override summary = 'List the data tables of an app.';
  static override description = 'Prints the API page {count, next, previous, results} with --json.';
  static override examples = [
    '<%= config.bin %> table list --site shop_prod --app crm',
    '<%= config.bin %> table list --site shop_prod --app crm --datasource main --materialized --json',
  ];
  static override flags = {
    site: siteFlag,
    app: appFlag,
    datasource: Flags.string({ summary: 'Only the tables of this data source (slug).' }),
    materialized: Flags.boolean({ summary: 'Only materialized tables (--no-materialized: only the others).', allowNo: true }),
    ...pageFlags,
  };

  async run() {
    const f = this.flags;
    const query: TableListParams = {};
    if (f.datasource !== undefined) query.datasource = f.datasource;
    if (f.materialized !== undefined) query.is_materialized = String(f.materialized);
    if (f.page !== undefined) query.page = f.page;
    if (f['page-size'] !== undefined) query.page_size = f['page-size'];
    const page = await (await this.backend()).listTables(f.site, f.app, query);
    this.log(pageTable(page, TABLE_COLUMNS, ['table', 'tables']));
    return page;
  }
}
