import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { MEMBER_COLUMNS, orgFlag, pageFlags, pageTable } from '../../organizations.ts';

export default class MemberListCommand extends BackendCommand<typeof MemberListCommand> {
  static override summary = 'List the members of an organization.';
  static override description = 'Inactive and deleted users are hidden unless --user-is-active / --user-is-deleted say otherwise. Prints the API\'s pagination body with --json.';
  static override examples = ['<%= config.bin %> member list --org acme', '<%= config.bin %> member list --org acme --is-admin true --ordering user__username --json'];
  static override flags = {
    org: orgFlag,
    search: Flags.string({ summary: 'Matches username, e-mail, first or last name.' }),
    'is-admin': Flags.string({ summary: 'true, false or all (default).' }),
    'user-is-active': Flags.string({ summary: 'true (default), false or all.' }),
    'user-is-deleted': Flags.string({ summary: 'true, false (default) or all.' }),
    ordering: Flags.string({ summary: 'user__username, user__email or created; a leading - reverses.' }),
    ...pageFlags,
  };

  async run() {
    const f = this.flags;
    const page = await (await this.backend()).listMembers(f.org, {
      search: f.search,
      is_admin: f['is-admin'],
      user__is_active: f['user-is-active'],
      user__is_deleted: f['user-is-deleted'],
      ordering: f.ordering,
      page: f.page,
      page_size: f['page-size'],
    });
    this.log(pageTable(page, MEMBER_COLUMNS, ['member', 'members']));
    return page;
  }
}
