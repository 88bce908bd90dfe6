import { BackendCommand } from '../../base.ts';
import { memberLines, memberRefArg, orgFlag } from '../../organizations.ts';

export default class MemberGetCommand extends BackendCommand<typeof MemberGetCommand> {
  static override summary = 'Show a member with groups and site permissions.';
  static override examples = ['<%= config.bin %> member get alice --org acme --json'];
  static override args = { user: memberRefArg };
  static override flags = { org: orgFlag };

  async run() {
    const member = await (await this.backend()).getMember(this.flags.org, this.args.user);
    this.log(memberLines(member));
    return member;
  }
}
