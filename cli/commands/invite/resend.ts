import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { invitationArg, orgFlag } from '../../invitations.ts';

export default class InviteResendCommand extends BackendCommand<typeof InviteResendCommand> {
  static override summary = 'Send an invitation e-mail again (same link; the expiry starts again).';
  static override examples = ['<%= config.bin %> invite resend 12 --org acme'];
  static override args = { invitation: invitationArg };
  static override flags = { org: orgFlag };

  async run() {
    const body = await (await this.backend()).resendInvitation(this.flags.org, this.args.invitation);
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
