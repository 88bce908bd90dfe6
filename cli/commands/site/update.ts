import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import type { SiteUpdate } from '../../../shared/sites/site.schemas.ts';
import { defined, parseSettings, siteFieldFlags, siteRefArg } from '../../sites.ts';

export default class SiteUpdateCommand extends BackendCommand<typeof SiteUpdateCommand> {
  static override summary = 'Update a site (PATCH: fields left out keep their values).';
  static override description = 'No environment prefix is applied on update. --no-active takes the site off its hosts (404) until --active.';
  static override examples = ['<%= config.bin %> site update shop --name "Shop 2" --settings \'{"theme":"light"}\'', '<%= config.bin %> site update shop --no-active'];
  static override args = { site: siteRefArg };
  static override flags = {
    ...siteFieldFlags,
    active: Flags.boolean({ summary: 'Whether the site is served on its hosts.', allowNo: true }),
  };

  async run() {
    const f = this.flags;
    const input = defined({
      name: f.name,
      description: f.description,
      environment: f.environment,
      site_settings: parseSettings(f.settings),
      is_active: f.active,
    }) as SiteUpdate;
    const site = await (await this.backend()).updateSite(this.args.site, input);
    this.log(keyValues(site));
    return site;
  }
}
