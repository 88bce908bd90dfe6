import { Args, Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import type { DomainCreate } from '../../../shared/sites/domain.schemas.ts';
import { defined, siteFlag } from '../../sites.ts';

export default class DomainAddCommand extends BackendCommand<typeof DomainAddCommand> {
  static override summary = 'Add a domain (host name) to a site.';
  static override description = '--primary makes it the primary domain (every other domain of the site becomes non-primary). Prints the API body {status, message, data} with --json.';
  static override examples = ['<%= config.bin %> domain add shop.example.com --site shop --primary'];
  static override args = { domain: Args.string({ name: 'domain', description: 'Host name (lowercase RFC 1123; no scheme, port or trailing dot)', required: true }) };
  static override flags = {
    site: siteFlag,
    primary: Flags.boolean({ summary: 'Make it the primary domain.' }),
    active: Flags.boolean({ summary: 'Whether the host is routed (default yes).', allowNo: true }),
  };

  async run() {
    const input = defined({ domain: this.args.domain, is_primary: this.flags.primary || undefined, is_active: this.flags.active }) as DomainCreate;
    const body = await (await this.backend()).createDomain(this.flags.site, input);
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
