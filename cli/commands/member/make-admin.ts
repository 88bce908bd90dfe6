import { BackendCommand } from '../../base.ts';
import { memberRefArg, orgFlag } from '../../organizations.ts';

export default class MemberMakeAdminCommand extends BackendCommand<typeof MemberMakeAdminCommand> {
  static override summary = 'Make a member an admin of the organization.';
  static override examples = ['<%= config.bin %> member make-admin alice --org acme'];
  static override args = { user: memberRefArg };
  static override flags = { org: orgFlag };

  async run() {
    const body = await (await this.backend()).setMemberAdmin(this.flags.org, this.args.user, true);
    this.log(body.message);
    return body;
  }
}
