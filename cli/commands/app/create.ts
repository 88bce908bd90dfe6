import { Args, Flags } from '@oclif/core';
import type { AppCreate } from '../../../shared/apps/app.schemas.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { parseJson, siteFlag } from '../../apps.ts';

export default class AppCreateCommand extends BackendCommand<typeof AppCreateCommand> {
  static override summary = 'Create an app (and its settings) in a site.';
  static override description = 'The slug is made from the name (-2, -3 … when taken).';
  static override examples = [
    '<%= config.bin %> app create "Sales Tracker" --site shop_prod',
    '<%= config.bin %> app create CRM --description "Customers" --settings \'{"category":"integration"}\' --site shop_prod --json',
  ];
  static override args = { name: Args.string({ description: 'The app name', required: true }) };
  static override flags = {
    site: siteFlag,
    description: Flags.string({ summary: 'What the app is for.' }),
    settings: Flags.string({ summary: 'Settings as a JSON object (display_name, category, primary_color, …).' }),
  };

  async run() {
    const input: AppCreate = { name: this.args.name };
    if (this.flags.description !== undefined) input.description = this.flags.description;
    if (this.flags.settings !== undefined) input.settings = parseJson(this.flags.settings, 'settings') as AppCreate['settings'];
    const body = await (await this.backend()).createApp(this.flags.site, input);
    const { tables: _t, datasources: _d, settings: _s, package_info: _p, ...shown } = body.data;
    this.log(body.message);
    this.log(keyValues(shown));
    return body;
  }
}
