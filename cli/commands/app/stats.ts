import { BackendCommand } from '../../base.ts';
import { keyValues, table } from '../../output.ts';
import { appArg, siteFlag } from '../../apps.ts';

export default class AppStatsCommand extends BackendCommand<typeof AppStatsCommand> {
  static override summary = 'Count the data sources and tables of an app.';
  static override examples = ['<%= config.bin %> app stats sales-tracker --site shop_prod'];
  static override args = { app: appArg };
  static override flags = { site: siteFlag };

  async run() {
    const stats = await (await this.backend()).appStats(this.flags.site, this.args.app);
    const { datasources, ...totals } = stats;
    this.log(keyValues(totals));
    if (datasources.length) {
      this.log('');
      this.log(table(datasources, [
        { header: 'Slug', get: (d) => d.slug },
        { header: 'Name', get: (d) => d.name },
        { header: 'Provider', get: (d) => d.provider_type },
        { header: 'Tables', get: (d) => d.total_tables },
        { header: 'Materialized', get: (d) => d.materialized_tables },
      ]));
    }
    return stats;
  }
}
