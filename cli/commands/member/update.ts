import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { groupIds, memberLines, memberRefArg, orgFlag, siteGrant } from '../../organizations.ts';
import type { MemberUpdate } from '../../../shared/organizations/member.schemas.ts';

export default class MemberUpdateCommand extends BackendCommand<typeof MemberUpdateCommand> {
  static override summary = 'Set a member\'s admin flag, groups and direct site permissions.';
  static override description = '--group (repeatable) replaces the member\'s groups, --site (repeatable) their grants on this organization\'s sites; what is not given is unchanged.';
  static override examples = [
    '<%= config.bin %> member update alice --org acme --admin',
    '<%= config.bin %> member update alice --org acme --group 3 --group 5 --site 0b7c…-uuid=view_site,access_site',
    '<%= config.bin %> member update alice --org acme --clear-groups --clear-sites',
  ];
  static override args = { user: memberRefArg };
  static override flags = {
    org: orgFlag,
    admin: Flags.boolean({ summary: 'Whether the member is an admin.', allowNo: true }),
    group: Flags.string({ summary: 'A group id (repeatable): the member\'s groups become these.', multiple: true }),
    'clear-groups': Flags.boolean({ summary: 'Remove the member from every group.', exclusive: ['group'] }),
    site: Flags.string({ summary: '<site uuid>=<perm>,<perm> (repeatable): the member\'s site grants become these.', multiple: true }),
    'clear-sites': Flags.boolean({ summary: 'Remove every direct site grant of the member.', exclusive: ['site'] }),
  };

  async run() {
    const f = this.flags;
    const input: MemberUpdate = {};
    if (f.admin !== undefined) input.is_admin = f.admin;
    if (f.group) input.groups = groupIds(f.group);
    else if (f['clear-groups']) input.groups = [];
    if (f.site) input.site = f.site.map(siteGrant);
    else if (f['clear-sites']) input.site = [];
    const member = await (await this.backend()).updateMember(f.org, this.args.user, input);
    this.log(memberLines(member));
    return member;
  }
}
