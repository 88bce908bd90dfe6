import { BackendCommand } from '../../base.ts';
import { memberRefArg, orgFlag } from '../../organizations.ts';

export default class MemberRemoveAdminCommand extends BackendCommand<typeof MemberRemoveAdminCommand> {
  static override summary = 'Take the admin flag from a member (refused for the last admin).';
  static override examples = ['<%= config.bin %> member remove-admin alice --org acme'];
  static override args = { user: memberRefArg };
  static override flags = { org: orgFlag };

  async run() {
    const body = await (await this.backend()).setMemberAdmin(this.flags.org, this.args.user, false);
    this.log(body.message);
    return body;
  }
}
