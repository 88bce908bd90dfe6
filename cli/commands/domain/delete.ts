import { BackendCommand } from '../../base.ts';
import { domainRefArg, siteFlag } from '../../sites.ts';

export default class DomainDeleteCommand extends BackendCommand<typeof DomainDeleteCommand> {
  static override summary = 'Delete a domain of a site (not the primary one).';
  static override examples = ['<%= config.bin %> domain delete old.example.com --site shop'];
  static override args = { domain: domainRefArg };
  static override flags = { site: siteFlag };

  async run() {
    const body = await (await this.backend()).deleteDomain(this.flags.site, this.args.domain);
    this.log(body.message);
    return body;
  }
}
