import { BackendCommand } from '../../base.ts';
import { memberLines, memberRefArg, orgFlag } from '../../organizations.ts';

export default class MemberAddCommand extends BackendCommand<typeof MemberAddCommand> {
  static override summary = 'Add an existing, active user to an organization.';
  static override description = 'For platform operators (superusers, staff, and --direct): it attaches the user without their consent. Everyone else invites (`platform invite create`), and the invitee accepts.';
  static override examples = ['<%= config.bin %> member add alice --org acme'];
  static override args = { user: { ...memberRefArg, description: 'Username or UUID of the user' } };
  static override flags = { org: orgFlag };

  async run() {
    const body = await (await this.backend()).addMember(this.flags.org, { user_slug: this.args.user });
    this.log(body.message);
    this.log(memberLines(body.data));
    return body;
  }
}
