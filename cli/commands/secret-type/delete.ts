import { BackendCommand } from '../../base.ts';
import { secretTypeArg, siteFlag } from '../../secrets.ts';

export default class SecretTypeDeleteCommand extends BackendCommand<typeof SecretTypeDeleteCommand> {
  static override summary = 'Delete a secret type of a site (refused while secrets use it).';
  static override examples = ['<%= config.bin %> secret-type delete api-token --site shop_prod'];
  static override args = { type: secretTypeArg };
  static override flags = { site: siteFlag };

  async run() {
    const body = await (await this.backend()).deleteSecretType(this.flags.site, this.args.type);
    this.log(body.message);
    return body;
  }
}
