import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { secretTypeArg, siteFlag } from '../../secrets.ts';

export default class SecretTypeGetCommand extends BackendCommand<typeof SecretTypeGetCommand> {
  static override summary = 'Show a secret type of a site.';
  static override examples = ['<%= config.bin %> secret-type get api-token --site shop_prod'];
  static override args = { type: secretTypeArg };
  static override flags = { site: siteFlag };

  async run() {
    const type = await (await this.backend()).getSecretType(this.flags.site, this.args.type);
    this.log(keyValues({ ...type }));
    return type;
  }
}
