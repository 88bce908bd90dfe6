// `platform secret …`: a site's secrets (/sites/<site>/api/secrets/). `secret rotate` works on
// the database: cli/commands/secret/rotate.ts.
import { Args, Flags } from '@oclif/core';
import { createdBody, type CreatedBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError } from '../../shared/errors.ts';
import { SECRET_MESSAGES } from '../../shared/secrets/secret.messages.ts';
import type { SecretHistoryItem, SecretListItem } from '../../shared/secrets/secret.schemas.ts';
import { defined, path } from '../api.ts';
import { ApiCommand, operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { keyValues, pageTable, when, type Column } from '../output.ts';
import { askHidden, canPrompt, missingValue } from '../prompt.ts';
import { parseJson, siteFlag } from '../flags.ts';

const keyArg = { key: Args.string({ name: 'key', description: 'The secret key (e.g. STRIPE_API_KEY)', required: true }) };
const appFlag = Flags.string({ summary: 'The app (slug) whose secret this is; without it, the tenant-wide secret.' });
const secretFlags = { site: siteFlag, app: appFlag };

const SECRET_COLUMNS: Column<SecretListItem>[] = [
  { header: 'Key', get: (s) => s.key },
  { header: 'App', get: (s) => s.app },
  { header: 'Type', get: (s) => s.secret_type },
  { header: 'Value', get: (s) => s.value },
  { header: 'Description', get: (s) => s.description },
  { header: 'Modified', get: (s) => when(s.modified) },
  { header: 'By', get: (s) => s.modified_by },
];

const HISTORY_COLUMNS: Column<SecretHistoryItem>[] = [
  { header: 'At', get: (h) => h.at.slice(0, 19).replace('T', ' ') },
  { header: 'Action', get: (h) => h.action },
  { header: 'Key', get: (h) => h.key },
  { header: 'App', get: (h) => h.app },
  { header: 'Actor', get: (h) => h.actor },
];

/** Two requests: an update of the secret, or its creation when there is none. */
class SecretSetCommand extends ApiCommand<typeof SecretSetCommand> {
  static override summary = 'Create or update a secret of a site.';
  static override description =
    'Updates the secret of that key (and --app) when it exists, else creates it. Without VALUE, it is prompted for on a terminal (hidden). The output masks the value; with --json it is {status, message, data}.';
  static override examples = [
    '<%= config.bin %> secret set STRIPE_API_KEY --site shop_prod',
    '<%= config.bin %> secret set DATABASE_URL postgres://… --site shop_prod --app checkout',
    '<%= config.bin %> secret set DB \'{"user":"app","password":"…"}\' --json-value --type db-credentials --site shop_prod',
  ];
  static override args = { ...keyArg, value: Args.string({ description: 'The value (prompted for when omitted on a terminal)' }) };
  static override flags = {
    ...secretFlags,
    type: Flags.string({ summary: 'The secret type (slug) whose JSON Schema the value must satisfy.' }),
    description: Flags.string({ summary: 'What the secret is for.' }),
    'json-value': Flags.boolean({ summary: 'Parse VALUE as JSON (an object for typed secrets, say) instead of taking it as a string.' }),
  };

  async run(): Promise<CreatedBody<SecretListItem>> {
    const { flags: f, args } = this;
    let text = args.value;
    if (text === undefined && canPrompt()) text = await askHidden('Value: ');
    if (text === undefined) throw missingValue('value (the VALUE argument)');
    const update = defined({ value: f['json-value'] ? parseJson(text, 'value') : text, secret_type: f.type, description: f.description });
    let body: CreatedBody<SecretListItem>;
    try {
      const secret = await this.call<SecretListItem>({ method: 'PUT', site: f.site, path: path`/api/secrets/${args.key}/`, query: { app: f.app }, body: update });
      body = createdBody(SECRET_MESSAGES.updated, secret);
    } catch (err) {
      if (!(err instanceof DomainError && err.code === 'NOT_FOUND' && /^Secret /.test(err.message))) throw err;
      body = await this.call({ method: 'POST', site: f.site, path: '/api/secrets/', body: { key: args.key, ...update, app: f.app } });
    }
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}

export const SECRET_COMMANDS = {
  'secret:list': operation({
    summary: 'List the secrets of a site (values masked).',
    description: "Values are never shown in lists: `platform secret get` shows one. Prints the API's pagination body with --json.",
    examples: ['secret list --site shop_prod', 'secret list --site shop_prod --app checkout --search STRIPE --json'],
    flags: {
      site: siteFlag,
      app: Flags.string({ summary: 'Only the secrets of this app (slug).' }),
      type: Flags.string({ summary: 'Only the secrets of this secret type (slug).' }),
      search: Flags.string({ summary: 'Matches key or description.' }),
      ordering: Flags.string({ summary: 'key, created or modified; a leading - reverses.' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      site: f.site,
      path: '/api/secrets/',
      query: { app: f.app, secret_type: f.type, search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<SecretListItem>) => pageTable(page, SECRET_COLUMNS, ['secret', 'secrets']),
  }),

  'secret:set': SecretSetCommand,

  'secret:get': operation({
    summary: 'Show a secret of a site, with its value.',
    description: "With --app, the app's secret, or the tenant-wide one it inherits (`inherited_from: tenant`).",
    examples: ['secret get STRIPE_API_KEY --site shop_prod', 'secret get DATABASE_URL --site shop_prod --app checkout --json'],
    args: keyArg,
    flags: secretFlags,
    request: ({ flags, args }) => ({ method: 'GET', site: flags.site, path: path`/api/secrets/${args.key}/`, query: { app: flags.app } }),
  }),

  'secret:delete': operation({
    summary: 'Delete a secret of a site (its history stays).',
    examples: ['secret delete STRIPE_API_KEY --site shop_prod', 'secret delete DATABASE_URL --site shop_prod --app checkout'],
    args: keyArg,
    flags: secretFlags,
    request: ({ flags, args }) => ({ method: 'DELETE', site: flags.site, path: path`/api/secrets/${args.key}/`, query: { app: flags.app } }),
  }),

  'secret:history': operation({
    summary: 'Show who created, updated and deleted a secret, and when (never values).',
    examples: ['secret history STRIPE_API_KEY --site shop_prod'],
    args: keyArg,
    flags: { ...secretFlags, ...pageFlags },
    request: ({ flags: f, args }) => ({
      method: 'GET',
      site: f.site,
      path: path`/api/secrets/${args.key}/history/`,
      query: { app: f.app, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<SecretHistoryItem>) => pageTable(page, HISTORY_COLUMNS, ['change', 'changes']),
  }),
};
