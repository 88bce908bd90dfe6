import { BackendCommand } from '../../base.ts';
import { appArg, siteFlag } from '../../apps.ts';

export default class AppRestoreCommand extends BackendCommand<typeof AppRestoreCommand> {
  static override summary = 'Restore a deleted app with its data sources and tables.';
  static override examples = ['<%= config.bin %> app restore sales-tracker --site shop_prod'];
  static override args = { app: appArg };
  static override flags = { site: siteFlag };

  async run() {
    const body = await (await this.backend()).restoreApp(this.flags.site, this.args.app);
    this.log(body.message);
    return body;
  }
}
