import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { createFlags, invitationInput } from '../../invitations.ts';

export default class InviteCreateCommand extends BackendCommand<typeof InviteCreateCommand> {
  static override summary = 'Invite someone to an organization (sends the invitation e-mail).';
  static override description =
    'The e-mail goes through SMTP_URL, or is written as an .eml file under <PLATFORM_DATA_DIR>/outbox/ (in direct mode: this machine\'s). Prints the API body {status, message, data} with --json.';
  static override examples = [
    '<%= config.bin %> invite create --org acme --email ada@example.com',
    '<%= config.bin %> invite create --org acme --email ada@example.com --permission view_organization --group Editors --site shop:view_site,access_site',
  ];
  static override flags = createFlags;

  async run() {
    const body = await (await this.backend()).createInvitation(this.flags.org, invitationInput(this.flags));
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
