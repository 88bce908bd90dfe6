import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { DOMAIN_COLUMNS, pageFlags, pageTable, siteFlag } from '../../sites.ts';

export default class DomainListCommand extends BackendCommand<typeof DomainListCommand> {
  static override summary = "List a site's domains (primary first).";
  static override description = 'Inactive domains are hidden unless --is-active says otherwise. Prints the API\'s pagination body with --json.';
  static override examples = ['<%= config.bin %> domain list --site shop', '<%= config.bin %> domain list --site shop --is-active all --json'];
  static override flags = {
    site: siteFlag,
    'is-active': Flags.string({ summary: 'true (default), false or all.' }),
    'is-primary': Flags.string({ summary: 'true, false or all (default).' }),
    search: Flags.string({ summary: 'Matches the host name.' }),
    ordering: Flags.string({ summary: 'domain, is_primary, is_active, created_at or modified_at; a leading - reverses (default -is_primary,domain).' }),
    ...pageFlags,
  };

  async run() {
    const f = this.flags;
    const query = { is_active: f['is-active'], is_primary: f['is-primary'], search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] };
    const page = await (await this.backend()).listDomains(f.site, query);
    this.log(pageTable(page, DOMAIN_COLUMNS, ['domain', 'domains']));
    return page;
  }
}
