import { Args, Flags } from '@oclif/core';
import { createdBody } from '../../../shared/common/envelopes.ts';
import { DomainError } from '../../../shared/errors.ts';
import { SECRET_MESSAGES } from '../../../shared/secrets/secret.messages.ts';
import type { SecretUpdate } from '../../../shared/secrets/secret.schemas.ts';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import { askHidden, canPrompt, missingValue } from '../../prompt.ts';
import { appFlag, parseJson, secretKeyArg, siteFlag } from '../../secrets.ts';

export default class SecretSetCommand extends BackendCommand<typeof SecretSetCommand> {
  static override summary = 'Create or update a secret of a site.';
  static override description =
    'Updates the secret of that key (and --app) when it exists, else creates it. Without VALUE, it is prompted for on a terminal (hidden). The output masks the value; with --json it is {status, message, data}.';
  static override examples = [
    '<%= config.bin %> secret set STRIPE_API_KEY --site shop_prod',
    '<%= config.bin %> secret set DATABASE_URL postgres://… --site shop_prod --app checkout',
    '<%= config.bin %> secret set DB \'{"user":"app","password":"…"}\' --json-value --type db-credentials --site shop_prod',
  ];
  static override args = { key: secretKeyArg, value: Args.string({ description: 'The value (prompted for when omitted on a terminal)' }) };
  static override flags = {
    site: siteFlag,
    app: appFlag,
    type: Flags.string({ summary: 'The secret type (slug) whose JSON Schema the value must satisfy.' }),
    description: Flags.string({ summary: 'What the secret is for.' }),
    'json-value': Flags.boolean({ summary: 'Parse VALUE as JSON (an object for typed secrets, say) instead of taking it as a string.' }),
  };

  async run() {
    const f = this.flags;
    let text = this.args.value;
    if (text === undefined && canPrompt()) text = await askHidden('Value: ');
    if (text === undefined) throw missingValue('value (the VALUE argument)');
    const value = f['json-value'] ? parseJson(text, 'value') : text;
    const backend = await this.backend();
    const update: SecretUpdate = { value };
    if (f.type !== undefined) update.secret_type = f.type;
    if (f.description !== undefined) update.description = f.description;
    let body;
    try {
      body = createdBody(SECRET_MESSAGES.updated, await backend.updateSecret(f.site, this.args.key, update, f.app));
    } catch (err) {
      if (!(err instanceof DomainError && err.code === 'NOT_FOUND' && /^Secret /.test(err.message))) throw err;
      body = await backend.createSecret(f.site, { key: this.args.key, ...update, value, ...(f.app ? { app: f.app } : {}) });
    }
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
