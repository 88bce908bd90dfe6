import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { siteRefArg } from '../../sites.ts';

export default class SiteGetCommand extends BackendCommand<typeof SiteGetCommand> {
  static override summary = 'Show a site.';
  static override examples = ['<%= config.bin %> site get shop', '<%= config.bin %> site get 5f0c…-uuid --json'];
  static override args = { site: siteRefArg };

  async run() {
    const site = await (await this.backend()).getSite(this.args.site);
    this.log(keyValues(site));
    return site;
  }
}
