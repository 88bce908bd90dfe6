import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { invitationArg, orgFlag } from '../../invitations.ts';

export default class InviteGetCommand extends BackendCommand<typeof InviteGetCommand> {
  static override summary = 'Show an invitation.';
  static override examples = ['<%= config.bin %> invite get 5f0c…-uuid --org acme', '<%= config.bin %> invite get 12 --org acme --json'];
  static override args = { invitation: invitationArg };
  static override flags = { org: orgFlag };

  async run() {
    const invitation = await (await this.backend()).getInvitation(this.flags.org, this.args.invitation);
    this.log(keyValues(invitation));
    return invitation;
  }
}
