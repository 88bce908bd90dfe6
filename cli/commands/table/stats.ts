import { BackendCommand } from '../../base.ts';
import { keyValues, table } from '../../output.ts';
import { appFlag, siteFlag } from '../../tables.ts';

export default class TableStatsCommand extends BackendCommand<typeof TableStatsCommand> {
  static override summary = 'Count the data tables of an app, by data source.';
  static override examples = ['<%= config.bin %> table stats --site shop_prod --app crm'];
  static override flags = { site: siteFlag, app: appFlag };

  async run() {
    const stats = await (await this.backend()).tableStats(this.flags.site, this.flags.app);
    const { datasources, ...totals } = stats;
    this.log(keyValues(totals));
    const rows = Object.entries(datasources).map(([slug, d]) => ({ slug, ...d }));
    if (rows.length) {
      this.log('');
      this.log(table(rows, [
        { header: 'Slug', get: (d) => d.slug },
        { header: 'Name', get: (d) => d.name },
        { header: 'Provider', get: (d) => d.provider_type },
        { header: 'Tables', get: (d) => d.table_count },
        { header: 'Materialized', get: (d) => d.materialized_count },
      ]));
    }
    return stats;
  }
}
