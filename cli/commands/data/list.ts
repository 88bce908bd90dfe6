import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { appFlag, filterFlag, plural, recordQuery, recordsTable, siteFlag, sortFlag, tableFlag } from '../../tables.ts';

export default class DataListCommand extends BackendCommand<typeof DataListCommand> {
  static override summary = 'List the records of a data table.';
  static override description = 'Each --filter is one condition of the query string (`age__gte=30`, `status__in=active,lead`); all must hold. Prints the API body {data, total, page, page_size} with --json.';
  static override examples = [
    "<%= config.bin %> data list --table contacts --filter 'status=lead' --sort -id --site shop_prod --app crm",
    "<%= config.bin %> data list --table contacts --filter 'id__gte=10' --filter 'email__icontains=example' --page-size 50 --site shop_prod --app crm --json",
    "<%= config.bin %> data list --table orders --aggregate 'count,sum(unit_price)' --group-by status --site shop_prod --app crm",
  ];
  static override flags = {
    site: siteFlag,
    app: appFlag,
    table: tableFlag,
    filter: filterFlag,
    sort: sortFlag,
    page: Flags.string({ summary: 'Page number (default 1).' }),
    'page-size': Flags.string({ summary: 'Records per page (default 20, at most 1000).' }),
    populate: Flags.string({ summary: 'Related records to include: a,b or *.' }),
    search: Flags.string({ summary: 'Full-text search keywords.' }),
    aggregate: Flags.string({ summary: "Aggregates instead of records: 'count,sum(price)'." }),
    'group-by': Flags.string({ summary: 'Group the aggregates by this field.' }),
  };

  async run() {
    const f = this.flags;
    const query = recordQuery(f.filter, {
      _sort: f.sort, page: f.page, page_size: f['page-size'], populate: f.populate, search: f.search, _aggregate: f.aggregate, _group_by: f['group-by'],
    });
    const backend = await this.backend();
    const body = await backend.listRecords(f.site, f.app, f.table, query);
    const rows = (body as { data?: unknown }).data;
    if (!Array.isArray(rows) || typeof body.total !== 'number') {
      this.log(JSON.stringify(body, null, 2)); // aggregates: the API's own shape
      return body;
    }
    let footer = plural(body.total, 'record');
    if (rows.length < body.total) footer += `, ${rows.length} shown (page ${body.page}, ${body.page_size} a page)`;
    if (body.page * body.page_size < body.total) footer += ` (next: --page ${body.page + 1})`;
    this.log(rows.length ? `${recordsTable(rows)}\n\n${footer}` : footer);
    return body;
  }
}
