import { BackendCommand } from '../../base.ts';
import { siteRefArg } from '../../sites.ts';

export default class SitePrivilegesCommand extends BackendCommand<typeof SitePrivilegesCommand> {
  static override summary = 'Your effective permissions on a site (organization role and groups included).';
  static override examples = ['<%= config.bin %> site privileges shop --json'];
  static override args = { site: siteRefArg };

  async run() {
    const body = await (await this.backend()).sitePrivileges(this.args.site);
    this.log(body.permissions.length ? body.permissions.join('\n') : '(no permissions)');
    return body;
  }
}
