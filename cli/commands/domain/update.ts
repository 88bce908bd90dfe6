import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import type { DomainUpdate } from '../../../shared/sites/domain.schemas.ts';
import { defined, domainRefArg, siteFlag } from '../../sites.ts';

export default class DomainUpdateCommand extends BackendCommand<typeof DomainUpdateCommand> {
  static override summary = 'Update a domain of a site (PATCH: flags left out keep their values).';
  static override description = '--primary moves the primary to this domain. The primary cannot be unset (make another domain primary instead).';
  static override examples = ['<%= config.bin %> domain update www.example.com --site shop --primary', '<%= config.bin %> domain update old.example.com --site shop --host new.example.com --no-active'];
  static override args = { domain: domainRefArg };
  static override flags = {
    site: siteFlag,
    host: Flags.string({ summary: 'New host name.' }),
    primary: Flags.boolean({ summary: 'Make it the primary domain.', allowNo: true }),
    active: Flags.boolean({ summary: 'Whether the host is routed.', allowNo: true }),
  };

  async run() {
    const f = this.flags;
    const input = defined({ domain: f.host, is_primary: f.primary, is_active: f.active }) as DomainUpdate;
    const domain = await (await this.backend()).updateDomain(f.site, this.args.domain, input);
    this.log(keyValues(domain));
    return domain;
  }
}
