import { BackendCommand } from '../../base.ts';
import { groupIdArg, groupLines } from '../../organizations.ts';

export default class GroupGetCommand extends BackendCommand<typeof GroupGetCommand> {
  static override summary = 'Show a group.';
  static override examples = ['<%= config.bin %> group get 3'];
  static override args = { id: groupIdArg };

  async run() {
    const group = await (await this.backend()).getGroup(this.args.id);
    this.log(groupLines(group));
    return group;
  }
}
