import { BackendCommand } from '../../base.ts';
import { appFlag, secretKeyArg, siteFlag } from '../../secrets.ts';

export default class SecretDeleteCommand extends BackendCommand<typeof SecretDeleteCommand> {
  static override summary = 'Delete a secret of a site (its history stays).';
  static override examples = ['<%= config.bin %> secret delete STRIPE_API_KEY --site shop_prod', '<%= config.bin %> secret delete DATABASE_URL --site shop_prod --app checkout'];
  static override args = { key: secretKeyArg };
  static override flags = { site: siteFlag, app: appFlag };

  async run() {
    const body = await (await this.backend()).deleteSecret(this.flags.site, this.args.key, this.flags.app);
    this.log(body.message);
    return body;
  }
}
