import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { GROUP_COLUMNS, pageFlags, pageTable } from '../../organizations.ts';

export default class GroupListCommand extends BackendCommand<typeof GroupListCommand> {
  static override summary = 'List groups.';
  static override examples = ['<%= config.bin %> group list --search ops --json'];
  static override flags = {
    search: Flags.string({ summary: 'Matches the name.' }),
    ordering: Flags.string({ summary: 'name or id; a leading - reverses.' }),
    ...pageFlags,
  };

  async run() {
    const f = this.flags;
    const page = await (await this.backend()).listGroups({ search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] });
    this.log(pageTable(page, GROUP_COLUMNS, ['group', 'groups']));
    return page;
  }
}
