import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { askHidden, canPrompt } from '../../prompt.ts';
import type { UserCreate } from '../../../shared/users/user.schemas.ts';
import { userFieldFlags, userInput } from '../../users.ts';

export default class UserCreateCommand extends BackendCommand<typeof UserCreateCommand> {
  static override summary = 'Create a platform user.';
  static override description = 'Without --username, one is generated from the e-mail or the name. Prints the API body {status, message, data} with --json.';
  static override examples = ['<%= config.bin %> user create --username alice --email alice@example.com --first-name Alice', '<%= config.bin %> user create --email ops@example.com --staff --json'];
  static override flags = userFieldFlags;

  async run() {
    const input = userInput(this.flags) as UserCreate;
    if (input.password === undefined && canPrompt()) input.password = await askHidden('Password: ');
    const body = await (await this.backend()).createUser(input);
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
