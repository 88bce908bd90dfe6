import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { userFieldFlags, userInput, userRefArg } from '../../users.ts';

export default class UserUpdateCommand extends BackendCommand<typeof UserUpdateCommand> {
  static override summary = 'Update a platform user.';
  static override description =
    'Fields left out keep their values. A new password or --no-active revokes the user\'s tokens. Your own new password needs --old-password (only a superuser sets another user\'s password without it). A new e-mail of your own takes effect when the link mailed to it is used; --restore brings back a deleted user (superusers).';
  static override examples = ['<%= config.bin %> user update alice --first-name Alicia --no-staff', '<%= config.bin %> user update alice --no-active'];
  static override args = { user: userRefArg };
  static override flags = {
    ...userFieldFlags,
    'old-password': Flags.string({ summary: 'Your current password, with --password when you change your own.' }),
    restore: Flags.boolean({ summary: 'Restore a deleted user (superusers).' }),
  };

  async run() {
    const input = userInput(this.flags);
    if (this.flags['old-password'] !== undefined) input.old_password = this.flags['old-password'];
    if (this.flags.restore) input.is_deleted = false;
    const user = await (await this.backend()).updateUser(this.args.user, input);
    this.log(keyValues(user));
    return user;
  }
}
