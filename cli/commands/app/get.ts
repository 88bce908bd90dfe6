import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appArg, siteFlag } from '../../apps.ts';

export default class AppGetCommand extends BackendCommand<typeof AppGetCommand> {
  static override summary = 'Show an app with its data sources, tables and settings.';
  static override examples = ['<%= config.bin %> app get sales-tracker --site shop_prod', '<%= config.bin %> app get sales-tracker --site shop_prod --json'];
  static override args = { app: appArg };
  static override flags = { site: siteFlag };

  async run() {
    const body = await (await this.backend()).getApp(this.flags.site, this.args.app);
    this.log(keyValues({ ...body.data }));
    return body;
  }
}
