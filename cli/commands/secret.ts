// `platform secret …`: a site's secrets (/sites/<site>/api/secrets/). `secret rotate` works on
// the database: cli/commands/secret/rotate.ts.
import { Args, Flags } from '@oclif/core';
import { createdBody, type CreatedBody } from '../../shared/common/envelopes.ts';
import { DomainError } from '../../shared/errors.ts';
import { SECRET_MESSAGES } from '../../shared/secrets/secret.messages.ts';
import type { SecretHistoryItem, SecretListItem } from '../../shared/secrets/secret.schemas.ts';
import { defined, path } from '../api.ts';
import { ApiCommand, api } from '../base.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { keyValues, pageOf } from '../output.ts';
import { askHidden, canPrompt, missingValue } from '../prompt.ts';

/** Two requests: an update of the secret, or its creation when there is none. */
class SecretSetCommand extends ApiCommand<typeof SecretSetCommand> {
  static override summary = 'Create or update a secret of a site.';
  static override description = 'Updates the secret of that key (and --app) when it exists, else creates it. Without VALUE, it is prompted for on a terminal (hidden). The output masks the value.';
  static override examples = ['<%= config.bin %> secret set STRIPE_API_KEY --site shop_prod', '<%= config.bin %> secret set DB \'{"user":"app","password":"…"}\' --json-value --type db-credentials --site shop_prod --app checkout'];
  static override args = { key: Args.string({ description: 'The secret key (e.g. STRIPE_API_KEY)', required: true }), value: Args.string({ description: 'The value (prompted for when omitted on a terminal)' }) };
  static override flags = {
    site: siteFlag,
    app: Flags.string({ summary: 'The app (slug) whose secret this is; without it, the tenant-wide secret.' }),
    type: Flags.string({ summary: 'The secret type (slug) whose JSON Schema the value must satisfy.' }),
    description: Flags.string({ summary: 'What the secret is for.' }),
    'json-value': Flags.boolean({ summary: 'Parse VALUE as JSON (an object for typed secrets, say) instead of taking it as a string.' }),
  };

  async run(): Promise<CreatedBody<SecretListItem>> {
    const { flags: f, args } = this;
    const text = args.value ?? (canPrompt() ? await askHidden('Value: ') : undefined);
    if (text === undefined) throw missingValue('value (the VALUE argument)');
    const update = defined({ value: f['json-value'] ? parseJson(text, 'value') : text, secret_type: f.type, description: f.description });
    let body: CreatedBody<SecretListItem>;
    try {
      body = createdBody(SECRET_MESSAGES.updated, await this.call<SecretListItem>({ method: 'PUT', site: f.site, path: path`/api/secrets/${args.key}/`, query: { app: f.app }, body: update }));
    } catch (err) {
      if (!(err instanceof DomainError && err.code === 'NOT_FOUND' && /^Secret /.test(err.message))) throw err;
      body = await this.call({ method: 'POST', site: f.site, path: '/api/secrets/', body: { key: args.key, ...update, app: f.app } });
    }
    this.log(`${body.message}\n${keyValues(body.data)}`);
    return body;
  }
}

export const SECRET_COMMANDS = {
  'secret:list': api('secrets_list', {
    examples: ['secret list --site shop_prod --app checkout --search STRIPE --json'],
    rename: { secret_type: 'type' },
    render: pageOf<SecretListItem>(['secret', 'secrets'], 'key app secret_type:type value description modified modified_by:by'),
  }),
  'secret:set': SecretSetCommand,
  'secret:get': api('secrets_retrieve', { args: ['key'], examples: ['secret get DATABASE_URL --site shop_prod --app checkout --json'] }),
  'secret:delete': api('secrets_destroy', { args: ['key'], examples: ['secret delete STRIPE_API_KEY --site shop_prod'] }),
  'secret:history': api('secrets_history', {
    args: ['key'],
    examples: ['secret history STRIPE_API_KEY --site shop_prod'],
    render: pageOf<SecretHistoryItem>(['change', 'changes'], 'at action key app actor', { at: (h) => h.at.slice(0, 19).replace('T', ' ') }),
  }),
};
