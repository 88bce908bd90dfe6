import { BackendCommand } from '../../base.ts';
import { invitationArg, orgFlag } from '../../invitations.ts';

export default class InviteCancelCommand extends BackendCommand<typeof InviteCancelCommand> {
  static override summary = 'Cancel an invitation (its link stops working).';
  static override examples = ['<%= config.bin %> invite cancel 5f0c…-uuid --org acme'];
  static override args = { invitation: invitationArg };
  static override flags = { org: orgFlag };

  async run() {
    const body = await (await this.backend()).cancelInvitation(this.flags.org, this.args.invitation);
    this.log(body.message);
    return body;
  }
}
