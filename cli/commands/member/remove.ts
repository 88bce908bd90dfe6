import { BackendCommand } from '../../base.ts';
import { memberRefArg, orgFlag } from '../../organizations.ts';

export default class MemberRemoveCommand extends BackendCommand<typeof MemberRemoveCommand> {
  static override summary = 'Remove a member (and their direct grants on the organization and its sites).';
  static override examples = ['<%= config.bin %> member remove alice --org acme'];
  static override args = { user: memberRefArg };
  static override flags = { org: orgFlag };

  async run() {
    const body = await (await this.backend()).removeMember(this.flags.org, this.args.user);
    this.log(body.message);
    return body;
  }
}
