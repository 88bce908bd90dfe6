import { Flags } from '@oclif/core';
import type { AppUpdate } from '../../../shared/apps/app.schemas.ts';
import { DomainError } from '../../../shared/errors.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { appArg, siteFlag } from '../../apps.ts';

export default class AppUpdateCommand extends BackendCommand<typeof AppUpdateCommand> {
  static override summary = 'Change the name or description of an app (the slug stays).';
  static override examples = ['<%= config.bin %> app update sales-tracker --name "Sales" --site shop_prod'];
  static override args = { app: appArg };
  static override flags = {
    site: siteFlag,
    name: Flags.string({ summary: 'The new name.' }),
    description: Flags.string({ summary: 'The new description.' }),
  };

  async run() {
    const input: AppUpdate = {};
    if (this.flags.name !== undefined) input.name = this.flags.name;
    if (this.flags.description !== undefined) input.description = this.flags.description;
    if (!Object.keys(input).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --name or --description.');
    const body = await (await this.backend()).updateApp(this.flags.site, this.args.app, input);
    const { tables: _t, datasources: _d, settings: _s, package_info: _p, ...shown } = body.data;
    this.log(body.message);
    this.log(keyValues(shown));
    return body;
  }
}
