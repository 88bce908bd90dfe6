import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';

export default class OrgCreateCommand extends BackendCommand<typeof OrgCreateCommand> {
  static override summary = 'Create an organization.';
  static override description =
    'Without --slug, one is generated from the name. Remotely, the logged-in user becomes its owner; with --direct (the system actor) it starts without members. Prints {status, message, data} with --json.';
  static override examples = ['<%= config.bin %> org create --name "Acme Corp"', '<%= config.bin %> org create --name Acme --slug acme --json'];
  static override flags = {
    name: Flags.string({ summary: 'Name.', required: true }),
    slug: Flags.string({ summary: 'Slug (lowercase letters, digits, hyphens).' }),
  };

  async run() {
    const body = await (await this.backend()).createOrganization({ name: this.flags.name, ...(this.flags.slug !== undefined ? { slug: this.flags.slug } : {}) });
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
