// `platform social-app …`: the social login providers of a site (/api/auth/social-apps/;
// docs/social-login.md). The create and update routes take an open body: their flags are written here, the body built from them.
import { Flags, type Interfaces } from '@oclif/core';
import type { SocialAppListItem, SocialAppView } from '../../shared/social/social-app.service.ts';
import { defined } from '../api.ts';
import { api } from '../base.ts';
import { parseJson } from '../flags.ts';
import { columns, keyValues, table } from '../output.ts';
import { askHidden, canPrompt, missingValue } from '../prompt.ts';

const shown = (a: SocialAppView) =>
  keyValues({ id: a.id, provider: `${a.provider} (${a.provider_display})`, provider_id: a.provider_id || '–', name: a.name, client_id: a.client_id, secret: a.secret, key: a.key || '–', settings: JSON.stringify(a.settings), configured: a.is_configured });
const answer = (body: { message: string; data: SocialAppView }) => [body.message, shown(body.data)];

const fieldFlags = {
  'provider-id': Flags.string({ summary: 'Names the app in /api/auth/{provider_id}/… (required for openid_connect; empty for the others).' }),
  name: Flags.string({ summary: 'The name shown on the login page.' }),
  'client-id': Flags.string({ summary: 'The OAuth client ID at the provider.' }),
  'secret-prompt': Flags.boolean({ summary: 'Ask for the client secret (hidden) instead of taking --secret from the command line.' }),
  secret: Flags.string({ summary: 'The client secret (Apple: the .p8 private key). Visible to other local users in the process list: prefer --secret-prompt.' }),
  key: Flags.string({ summary: 'Apple: the key ID of the private key.' }),
  settings: Flags.string({ summary: 'A JSON object: server_url (the issuer or its discovery document), icon, auto_redirect, tenant (Microsoft), team_id (Apple).' }),
};

/** The body of create and update: the flags given, the secret asked for with --secret-prompt. */
async function fields(f: Interfaces.InferredFlags<typeof fieldFlags> & { provider?: string }): Promise<Record<string, unknown>> {
  if (f['secret-prompt'] && !canPrompt()) throw missingValue('secret (--secret-prompt needs a terminal)');
  const secret = f['secret-prompt'] ? await askHidden('Client secret: ') : f.secret;
  const settings = f.settings === undefined ? undefined : parseJson(f.settings, 'settings');
  return defined({ provider: f.provider, provider_id: f['provider-id'], name: f.name, client_id: f['client-id'], secret, key: f.key, settings });
}

export const SOCIAL_APP_COMMANDS = {
  'social-app:list': api('social_apps_list', {
    examples: ['social-app list --provider openid_connect --site shop_prod --json'],
    render: (body: { data: SocialAppListItem[]; total: number; pagination: { page: number; total_pages: number } }) =>
      body.data.length
        ? [table(body.data, columns('id provider provider_id name is_configured:configured auto_redirect')), `${body.total} social app${body.total === 1 ? '' : 's'} (page ${body.pagination.page} of ${body.pagination.total_pages}).`]
        : 'No social apps.',
  }),
  'social-app:create': api('social_apps_create', {
    description: 'Site superusers (the organization\'s owners and admins). The secret is stored encrypted and shown only in this answer. Providers: openid_connect (any OIDC issuer: --settings \'{"server_url": …}\'), google, microsoft (settings.tenant), gitlab, apple (settings.team_id, --key), github.',
    examples: ['social-app create --provider github --name GitHub --client-id Iv1.abc --secret-prompt --site shop_prod --json'],
    flags: { ...fieldFlags, provider: Flags.string({ summary: 'The provider.', required: true }) },
    body: ({ flags: f }) => fields(f),
    render: answer,
  }),
  'social-app:get': api('social_apps_retrieve', { args: ['id'], examples: ['social-app get 3 --site shop_prod'], render: shown }),
  'social-app:update': api('social_apps_partial_update', {
    description: '--settings replaces the settings object whole.',
    examples: ['social-app update 3 --name "Company login" --site shop_prod', 'social-app update 3 --secret-prompt --site shop_prod --json'],
    args: ['id'],
    flags: { ...fieldFlags, provider: Flags.string({ summary: 'Another provider.' }) },
    body: ({ flags: f }) => fields(f),
    render: answer,
  }),
  'social-app:delete': api('social_apps_destroy', { args: ['id'], examples: ['social-app delete 3 --site shop_prod'], render: (body: { message: string }) => body.message }),
};
