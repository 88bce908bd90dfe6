import { BackendCommand } from '../../base.ts';
import { orgRefArg } from '../../organizations.ts';

export default class OrgPrivilegesCommand extends BackendCommand<typeof OrgPrivilegesCommand> {
  static override summary = 'Your effective permissions on an organization (group-inherited ones included).';
  static override examples = ['<%= config.bin %> org privileges acme --json'];
  static override args = { org: orgRefArg };

  async run() {
    const body = await (await this.backend()).organizationPrivileges(this.args.org);
    this.log(body.permissions.length ? body.permissions.join('\n') : '(no permissions)');
    return body;
  }
}
