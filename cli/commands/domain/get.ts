import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { domainRefArg, siteFlag } from '../../sites.ts';

export default class DomainGetCommand extends BackendCommand<typeof DomainGetCommand> {
  static override summary = 'Show a domain of a site.';
  static override examples = ['<%= config.bin %> domain get shop.example.com --site shop'];
  static override args = { domain: domainRefArg };
  static override flags = { site: siteFlag };

  async run() {
    const domain = await (await this.backend()).getDomain(this.flags.site, this.args.domain);
    this.log(keyValues(domain));
    return domain;
  }
}
