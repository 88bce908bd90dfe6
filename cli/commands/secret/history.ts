import { BackendCommand } from '../../base.ts';
import { appFlag, HISTORY_COLUMNS, pageFlags, pageTable, secretKeyArg, siteFlag } from '../../secrets.ts';

export default class SecretHistoryCommand extends BackendCommand<typeof SecretHistoryCommand> {
  static override summary = 'Show who created, updated and deleted a secret, and when (never values).';
  static override examples = ['<%= config.bin %> secret history STRIPE_API_KEY --site shop_prod'];
  static override args = { key: secretKeyArg };
  static override flags = { site: siteFlag, app: appFlag, ...pageFlags };

  async run() {
    const f = this.flags;
    const page = await (await this.backend()).secretHistory(f.site, this.args.key, { app: f.app, page: f.page, page_size: f['page-size'] });
    this.log(pageTable(page, HISTORY_COLUMNS, ['change', 'changes']));
    return page;
  }
}
