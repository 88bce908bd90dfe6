import { Flags } from '@oclif/core';
import type { SiteUserView } from '../../shared/tenancy/tenant-users.schemas.ts';
import type { UserView } from '../../shared/users/user.schemas.ts';
import { ApiCommand } from '../base.ts';
import { keyValues } from '../output.ts';

export default class WhoamiCommand extends ApiCommand<typeof WhoamiCommand> {
  static override summary = 'Show who the CLI acts as, on the platform or on one site (--site).';
  static override description =
    'Remote mode: the logged-in user (GET /api/profile/); with --site, the site user the CLI acts as there (its own login, or the token exchanged for your platform login). Direct mode: the system actor "cli", an operator with database access acting with every permission (explicit elevation), or the user named with --as (with --site, that site\'s user).';
  static override examples = [
    '<%= config.bin %> whoami',
    '<%= config.bin %> whoami --site shop_prod',
    '<%= config.bin %> whoami --direct',
    '<%= config.bin %> whoami --site shop_prod --direct --as alice',
  ];
  static override flags = { site: Flags.string({ summary: 'Who you are on this site (its schema name).' }) };

  async run() {
    const site = this.flags.site;
    const who: UserView | SiteUserView | { actor: 'system'; name: string; access: string } =
      this.flags.direct && this.flags.as === undefined
        ? { actor: 'system', name: 'cli', access: 'direct database access, every permission (explicit elevation)' }
        : await this.call<UserView | SiteUserView>({ method: 'GET', site, path: '/api/profile/' });
    this.log(keyValues({ ...who }));
    return who;
  }
}
