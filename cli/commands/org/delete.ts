import { BackendCommand } from '../../base.ts';
import { orgRefArg } from '../../organizations.ts';

export default class OrgDeleteCommand extends BackendCommand<typeof OrgDeleteCommand> {
  static override summary = 'Delete an organization for good, with its sites (schemas dropped), memberships and invitations.';
  static override description = 'Members who belong to no other organization are soft-deleted (except the caller and superusers). Cannot be undone.';
  static override examples = ['<%= config.bin %> org delete acme'];
  static override args = { org: orgRefArg };

  async run() {
    const body = await (await this.backend()).deleteOrganization(this.args.org);
    this.log(body.message);
    return body;
  }
}
