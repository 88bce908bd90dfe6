import { BackendCommand } from '../base.ts';
import { keyValues } from '../output.ts';

export default class WhoamiCommand extends BackendCommand<typeof WhoamiCommand> {
  static override summary = 'Show who the CLI acts as.';
  static override description =
    'Remote mode: the logged-in user (GET /api/profile/). Direct mode: the system actor "cli", an operator with database access acting with every permission (explicit elevation).';
  static override examples = ['<%= config.bin %> whoami', '<%= config.bin %> whoami --direct'];

  async run() {
    const who = await (await this.backend()).whoami();
    this.log(keyValues({ ...who }));
    return who;
  }
}
