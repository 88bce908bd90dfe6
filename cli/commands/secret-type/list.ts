import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { pageFlags, pageTable, SECRET_TYPE_COLUMNS, siteFlag } from '../../secrets.ts';

export default class SecretTypeListCommand extends BackendCommand<typeof SecretTypeListCommand> {
  static override summary = 'List the secret types of a site.';
  static override examples = ['<%= config.bin %> secret-type list --site shop_prod'];
  static override flags = { site: siteFlag, search: Flags.string({ summary: 'Matches name, slug or description.' }), ...pageFlags };

  async run() {
    const f = this.flags;
    const page = await (await this.backend()).listSecretTypes(f.site, { search: f.search, page: f.page, page_size: f['page-size'] });
    this.log(pageTable(page, SECRET_TYPE_COLUMNS, ['secret type', 'secret types']));
    return page;
  }
}
