import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { orgRefArg } from '../../organizations.ts';
import type { OrganizationUpdate } from '../../../shared/organizations/organization.schemas.ts';

export default class OrgUpdateCommand extends BackendCommand<typeof OrgUpdateCommand> {
  static override summary = 'Update an organization.';
  static override description = 'Fields left out keep their values. --no-active hides it from the default list.';
  static override examples = ['<%= config.bin %> org update acme --name "Acme Inc"', '<%= config.bin %> org update acme --no-active'];
  static override args = { org: orgRefArg };
  static override flags = {
    name: Flags.string({ summary: 'Name.' }),
    slug: Flags.string({ summary: 'Slug (lowercase letters, digits, hyphens).' }),
    active: Flags.boolean({ summary: 'Whether the organization is active.', allowNo: true }),
  };

  async run() {
    const f = this.flags;
    const input: OrganizationUpdate = {};
    if (f.name !== undefined) input.name = f.name;
    if (f.slug !== undefined) input.slug = f.slug;
    if (f.active !== undefined) input.is_active = f.active;
    const org = await (await this.backend()).updateOrganization(this.args.org, input);
    this.log(keyValues(org));
    return org;
  }
}
