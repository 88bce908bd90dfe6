import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import type { InvitationListParams } from '../../backend/types.ts';
import { invitationsTable, orgFlag } from '../../invitations.ts';

export default class InviteListCommand extends BackendCommand<typeof InviteListCommand> {
  static override summary = 'List the invitations of an organization.';
  static override description = 'Newest first. Prints the API\'s pagination body {count, next, previous, results} with --json. Tokens are never shown.';
  static override examples = ['<%= config.bin %> invite list --org acme', '<%= config.bin %> invite list --org acme --state pending --json'];
  static override flags = {
    org: orgFlag,
    state: Flags.string({ summary: 'pending, accepted, cancelled or expired.' }),
    search: Flags.string({ summary: 'Part of the invitee e-mail.' }),
    page: Flags.string({ summary: 'Page number, or "last" (default 1).' }),
    'page-size': Flags.string({ summary: 'Invitations per page (default 20, at most 100).' }),
  };

  async run() {
    const f = this.flags;
    const query: InvitationListParams = { state: f.state, search: f.search, page: f.page, page_size: f['page-size'] };
    const page = await (await this.backend()).listInvitations(f.org, query);
    this.log(invitationsTable(page));
    return page;
  }
}
