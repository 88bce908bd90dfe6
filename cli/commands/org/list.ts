import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { ORG_COLUMNS, pageFlags, pageTable } from '../../organizations.ts';

export default class OrgListCommand extends BackendCommand<typeof OrgListCommand> {
  static override summary = 'List organizations.';
  static override description = 'Inactive organizations are hidden unless --is-active says otherwise. Prints the API\'s pagination body with --json.';
  static override examples = ['<%= config.bin %> org list --search acme', '<%= config.bin %> org list --is-active all --ordering -created --json'];
  static override flags = {
    search: Flags.string({ summary: 'Matches name or slug.' }),
    'is-active': Flags.string({ summary: 'true (default), false or all.' }),
    ordering: Flags.string({ summary: 'name, slug, created or modified; a leading - reverses.' }),
    ...pageFlags,
  };

  async run() {
    const f = this.flags;
    const page = await (await this.backend()).listOrganizations({
      search: f.search,
      is_active: f['is-active'],
      ordering: f.ordering,
      page: f.page,
      page_size: f['page-size'],
    });
    this.log(pageTable(page, ORG_COLUMNS, ['organization', 'organizations']));
    return page;
  }
}
