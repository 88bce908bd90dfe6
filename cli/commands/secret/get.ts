import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appFlag, secretKeyArg, siteFlag } from '../../secrets.ts';

export default class SecretGetCommand extends BackendCommand<typeof SecretGetCommand> {
  static override summary = 'Show a secret of a site, with its value.';
  static override description = 'With --app, the app\'s secret, or the tenant-wide one it inherits (`inherited_from: tenant`).';
  static override examples = ['<%= config.bin %> secret get STRIPE_API_KEY --site shop_prod', '<%= config.bin %> secret get DATABASE_URL --site shop_prod --app checkout --json'];
  static override args = { key: secretKeyArg };
  static override flags = { site: siteFlag, app: appFlag };

  async run() {
    const secret = await (await this.backend()).getSecret(this.flags.site, this.args.key, this.flags.app);
    this.log(keyValues({ ...secret }));
    return secret;
  }
}
