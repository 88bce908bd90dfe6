import { BackendCommand } from '../../base.ts';
import { appArg, siteFlag } from '../../apps.ts';

export default class AppDeleteCommand extends BackendCommand<typeof AppDeleteCommand> {
  static override summary = 'Delete an app (soft: it, its data sources and tables become inactive).';
  static override description = '`platform app restore` brings them back.';
  static override examples = ['<%= config.bin %> app delete sales-tracker --site shop_prod'];
  static override args = { app: appArg };
  static override flags = { site: siteFlag };

  async run() {
    const body = await (await this.backend()).deleteApp(this.flags.site, this.args.app);
    this.log(body.message);
    return body;
  }
}
