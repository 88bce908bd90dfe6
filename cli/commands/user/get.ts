import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { userRefArg } from '../../users.ts';

export default class UserGetCommand extends BackendCommand<typeof UserGetCommand> {
  static override summary = 'Show a platform user.';
  static override examples = ['<%= config.bin %> user get alice', '<%= config.bin %> user get 5f0c…-uuid --json'];
  static override args = { user: userRefArg };

  async run() {
    const user = await (await this.backend()).getUser(this.args.user);
    this.log(keyValues(user));
    return user;
  }
}
