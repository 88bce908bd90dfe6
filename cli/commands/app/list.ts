import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { APP_COLUMNS, listTable, siteFlag } from '../../apps.ts';

export default class AppListCommand extends BackendCommand<typeof AppListCommand> {
  static override summary = 'List the apps of a site.';
  static override description = 'Active apps by default; --inactive for the deleted ones, --all for both. Prints {status, message, data, total} with --json.';
  static override examples = ['<%= config.bin %> app list --site shop_prod', '<%= config.bin %> app list --site shop_prod --inactive --json'];
  static override flags = {
    site: siteFlag,
    inactive: Flags.boolean({ summary: 'Only the deleted (inactive) apps.', exclusive: ['all'] }),
    all: Flags.boolean({ summary: 'Active and inactive apps.' }),
  };

  async run() {
    const isActive = this.flags.all ? 'all' : this.flags.inactive ? 'false' : undefined;
    const body = await (await this.backend()).listApps(this.flags.site, isActive);
    this.log(listTable(body.data, APP_COLUMNS, ['app', 'apps']));
    return body;
  }
}
