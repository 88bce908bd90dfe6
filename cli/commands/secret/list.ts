import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { pageFlags, pageTable, SECRET_COLUMNS, siteFlag } from '../../secrets.ts';

export default class SecretListCommand extends BackendCommand<typeof SecretListCommand> {
  static override summary = 'List the secrets of a site (values masked).';
  static override description = 'Values are never shown in lists: `platform secret get` shows one. Prints the API\'s pagination body with --json.';
  static override examples = ['<%= config.bin %> secret list --site shop_prod', '<%= config.bin %> secret list --site shop_prod --app checkout --search STRIPE --json'];
  static override flags = {
    site: siteFlag,
    app: Flags.string({ summary: 'Only the secrets of this app (slug).' }),
    type: Flags.string({ summary: 'Only the secrets of this secret type (slug).' }),
    search: Flags.string({ summary: 'Matches key or description.' }),
    ordering: Flags.string({ summary: 'key, created or modified; a leading - reverses.' }),
    ...pageFlags,
  };

  async run() {
    const f = this.flags;
    const query = { app: f.app, secret_type: f.type, search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] };
    const page = await (await this.backend()).listSecrets(f.site, query);
    this.log(pageTable(page, SECRET_COLUMNS, ['secret', 'secrets']));
    return page;
  }
}
