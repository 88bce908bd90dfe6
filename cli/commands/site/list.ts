import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { pageFlags, pageTable, SITE_COLUMNS } from '../../sites.ts';

export default class SiteListCommand extends BackendCommand<typeof SiteListCommand> {
  static override summary = 'List the sites you can view (all of them, or one organization\'s).';
  static override description = 'Inactive sites are hidden unless --is-active says otherwise. Prints the API\'s pagination body {count, next, previous, results} with --json.';
  static override examples = ['<%= config.bin %> site list', '<%= config.bin %> site list --org acme --environment staging --ordering -created_at --json'];
  static override flags = {
    org: Flags.string({ summary: 'Only the sites of this organization (slug or UUID).' }),
    environment: Flags.string({ summary: 'production, staging, development or testing.' }),
    'is-active': Flags.string({ summary: 'true (default), false or all.' }),
    search: Flags.string({ summary: 'Matches name or schema name.' }),
    ordering: Flags.string({ summary: 'name, created_at or updated_at; a leading - reverses.' }),
    ...pageFlags,
  };

  async run() {
    const f = this.flags;
    const query = { environment: f.environment, is_active: f['is-active'], search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] };
    const page = await (await this.backend()).listSites(query, f.org);
    this.log(pageTable(page, SITE_COLUMNS, ['site', 'sites']));
    return page;
  }
}
