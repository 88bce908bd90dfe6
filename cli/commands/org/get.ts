import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { orgRefArg } from '../../organizations.ts';

export default class OrgGetCommand extends BackendCommand<typeof OrgGetCommand> {
  static override summary = 'Show an organization.';
  static override examples = ['<%= config.bin %> org get acme'];
  static override args = { org: orgRefArg };

  async run() {
    const org = await (await this.backend()).getOrganization(this.args.org);
    this.log(keyValues(org));
    return org;
  }
}
