import { BackendCommand } from '../../base.ts';
import { siteRefArg } from '../../sites.ts';

export default class SiteDeleteCommand extends BackendCommand<typeof SiteDeleteCommand> {
  static override summary = 'Delete a site: drops its schema and all its data, its domains and its permissions. Cannot be undone.';
  static override description = 'To take a site offline without losing data, use `site update <site> --no-active` instead.';
  static override examples = ['<%= config.bin %> site delete shop'];
  static override args = { site: siteRefArg };

  async run() {
    const body = await (await this.backend()).deleteSite(this.args.site);
    this.log(body.message);
    return body;
  }
}
