import { BackendCommand } from '../../base.ts';
import { groupIdArg } from '../../organizations.ts';

export default class GroupDeleteCommand extends BackendCommand<typeof GroupDeleteCommand> {
  static override summary = 'Delete a group (superusers and staff); its members lose it and the grants it held.';
  static override examples = ['<%= config.bin %> group delete 3'];
  static override args = { id: groupIdArg };

  async run() {
    const body = await (await this.backend()).deleteGroup(this.args.id);
    this.log(body.message);
    return body;
  }
}
