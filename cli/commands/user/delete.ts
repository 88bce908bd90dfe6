import { BackendCommand } from '../../base.ts';
import { userRefArg } from '../../users.ts';

export default class UserDeleteCommand extends BackendCommand<typeof UserDeleteCommand> {
  static override summary = 'Delete a platform user (soft: the account stays, but can no longer log in).';
  static override examples = ['<%= config.bin %> user delete alice'];
  static override args = { user: userRefArg };

  async run() {
    const body = await (await this.backend()).deleteUser(this.args.user);
    this.log(body.message);
    return body;
  }
}
