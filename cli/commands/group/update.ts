import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { groupIdArg, groupLines } from '../../organizations.ts';
import type { GroupUpdate } from '../../../shared/permissions/group.schemas.ts';

export default class GroupUpdateCommand extends BackendCommand<typeof GroupUpdateCommand> {
  static override summary = 'Update a group (superusers and staff).';
  static override description = '--permission (repeatable) replaces the whole set; what is not given is unchanged.';
  static override examples = ['<%= config.bin %> group update 3 --name Ops --permission view_site', '<%= config.bin %> group update 3 --clear-permissions'];
  static override args = { id: groupIdArg };
  static override flags = {
    name: Flags.string({ summary: 'Name.' }),
    permission: Flags.string({ summary: 'A permission codename (repeatable).', multiple: true }),
    'clear-permissions': Flags.boolean({ summary: 'Remove every permission of the group.', exclusive: ['permission'] }),
  };

  async run() {
    const f = this.flags;
    const input: GroupUpdate = {};
    if (f.name !== undefined) input.name = f.name;
    if (f.permission) input.permissions = f.permission;
    else if (f['clear-permissions']) input.permissions = [];
    const group = await (await this.backend()).updateGroup(this.args.id, input);
    this.log(groupLines(group));
    return group;
  }
}
