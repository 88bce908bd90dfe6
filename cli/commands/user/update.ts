import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { userFieldFlags, userInput, userRefArg } from '../../users.ts';

export default class UserUpdateCommand extends BackendCommand<typeof UserUpdateCommand> {
  static override summary = 'Update a platform user.';
  static override description = 'Fields left out keep their values. A new password or --no-active revokes the user\'s tokens.';
  static override examples = ['<%= config.bin %> user update alice --first-name Alicia --no-staff', '<%= config.bin %> user update alice --no-active'];
  static override args = { user: userRefArg };
  static override flags = userFieldFlags;

  async run() {
    const user = await (await this.backend()).updateUser(this.args.user, userInput(this.flags));
    this.log(keyValues(user));
    return user;
  }
}
