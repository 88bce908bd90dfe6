import type { UserView } from '../../shared/users/user.schemas.ts';
import { ApiCommand } from '../base.ts';
import { keyValues } from '../output.ts';

export default class WhoamiCommand extends ApiCommand<typeof WhoamiCommand> {
  static override summary = 'Show who the CLI acts as.';
  static override description =
    'Remote mode: the logged-in user (GET /api/profile/). Direct mode: the system actor "cli", an operator with database access acting with every permission (explicit elevation), or the user named with --as.';
  static override examples = ['<%= config.bin %> whoami', '<%= config.bin %> whoami --direct'];

  async run() {
    const who: UserView | { actor: 'system'; name: string; access: string } =
      this.flags.direct && this.flags.as === undefined
        ? { actor: 'system', name: 'cli', access: 'direct database access, every permission (explicit elevation)' }
        : await this.call<UserView>({ method: 'GET', path: '/api/profile/' });
    this.log(keyValues({ ...who }));
    return who;
  }
}
