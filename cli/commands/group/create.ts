import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { groupLines } from '../../organizations.ts';

export default class GroupCreateCommand extends BackendCommand<typeof GroupCreateCommand> {
  static override summary = 'Create a group (superusers and staff).';
  static override examples = ['<%= config.bin %> group create --name Operators --permission view_site --permission access_site'];
  static override flags = {
    name: Flags.string({ summary: 'Name (unique, case-insensitively).', required: true }),
    permission: Flags.string({ summary: 'A permission codename (repeatable).', multiple: true }),
  };

  async run() {
    const body = await (await this.backend()).createGroup({ name: this.flags.name, ...(this.flags.permission ? { permissions: this.flags.permission } : {}) });
    this.log(body.message);
    this.log(groupLines(body.data));
    return body;
  }
}
