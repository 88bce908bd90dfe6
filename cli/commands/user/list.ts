import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import type { UserListParams } from '../../backend/types.ts';
import { usersTable } from '../../users.ts';

export default class UserListCommand extends BackendCommand<typeof UserListCommand> {
  static override summary = 'List platform users.';
  static override description = 'Deleted users are hidden unless --is-deleted says otherwise. Prints the API\'s pagination body {count, next, previous, results} with --json.';
  static override examples = ['<%= config.bin %> user list --search alice', '<%= config.bin %> user list --ordering -date_joined --page-size 50 --json'];
  static override flags = {
    search: Flags.string({ summary: 'Matches username, e-mail, first or last name.' }),
    ordering: Flags.string({ summary: 'username, email, date_joined or last_login; a leading - reverses.' }),
    'is-active': Flags.string({ summary: 'true, false or all.' }),
    'is-deleted': Flags.string({ summary: 'true, false (default) or all.' }),
    page: Flags.string({ summary: 'Page number, or "last" (default 1).' }),
    'page-size': Flags.string({ summary: 'Users per page (default 20, at most 100).' }),
  };

  async run() {
    const f = this.flags;
    const query: UserListParams = {
      search: f.search,
      ordering: f.ordering,
      is_active: f['is-active'],
      is_deleted: f['is-deleted'],
      page: f.page,
      page_size: f['page-size'],
    };
    const page = await (await this.backend()).listUsers(query);
    this.log(usersTable(page));
    return page;
  }
}
