// `platform social-app …`: the social login providers of a site (/api/auth/social-apps/;
// docs/social-login.md).
import { Args, Flags } from '@oclif/core';
import type { SocialAppListItem, SocialAppView } from '../../shared/social/social-app.service.ts';
import { DomainError } from '../../shared/errors.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags, parseJson, siteFlag } from '../flags.ts';
import { keyValues, table } from '../output.ts';
import { askHidden, canPrompt, missingValue } from '../prompt.ts';

const idArg = { id: Args.string({ description: 'The social app (its id)', required: true }) };
const appPath = (id: string) => path`/api/auth/social-apps/${id}/`;

interface ListBody {
  data: SocialAppListItem[];
  total: number;
  pagination: { page: number; page_size: number; total_pages: number };
}
interface Flagged<T> {
  success: boolean;
  message: string;
  data: T;
}

const lines = (a: SocialAppView) =>
  keyValues({
    id: a.id,
    provider: `${a.provider} (${a.provider_display})`,
    provider_id: a.provider_id || '–',
    name: a.name,
    client_id: a.client_id,
    secret: a.secret,
    key: a.key || '–',
    settings: JSON.stringify(a.settings),
    configured: a.is_configured,
  });

const fieldFlags = {
  'provider-id': Flags.string({ summary: 'Names the app in /api/auth/{provider_id}/… (required for openid_connect; empty for the others).' }),
  name: Flags.string({ summary: 'The name shown on the login page.' }),
  'client-id': Flags.string({ summary: 'The OAuth client ID at the provider.' }),
  'secret-prompt': Flags.boolean({ summary: 'Ask for the client secret (hidden) instead of taking --secret from the command line.' }),
  secret: Flags.string({ summary: 'The client secret (Apple: the .p8 private key). Visible to other local users in the process list: prefer --secret-prompt.' }),
  key: Flags.string({ summary: 'Apple: the key ID of the private key.' }),
  settings: Flags.string({ summary: 'A JSON object: server_url (the issuer or its discovery document), icon, auto_redirect, tenant (Microsoft), team_id (Apple).' }),
};

type FieldFlags = { 'provider-id'?: string; name?: string; 'client-id'?: string; 'secret-prompt'?: boolean; secret?: string; key?: string; settings?: string };

async function fields(f: FieldFlags): Promise<Record<string, unknown>> {
  let secret = f.secret;
  if (f['secret-prompt']) {
    if (!canPrompt()) throw missingValue('secret (--secret-prompt needs a terminal)');
    secret = await askHidden('Client secret: ');
  }
  return defined({
    provider_id: f['provider-id'],
    name: f.name,
    client_id: f['client-id'],
    secret,
    key: f.key,
    settings: f.settings === undefined ? undefined : parseJson(f.settings, 'settings'),
  });
}

export const SOCIAL_APP_COMMANDS = {
  'social-app:list': operation({
    summary: "List a site's social login providers (what its login page shows).",
    description: 'The public list: no credentials. --json prints {status, message, data, total, pagination}.',
    examples: ['social-app list --site shop_prod', 'social-app list --provider openid_connect --site shop_prod --json'],
    flags: {
      site: siteFlag,
      search: Flags.string({ summary: 'Part of the name, provider, client ID or provider_id.' }),
      provider: Flags.string({ summary: 'Only apps of this provider.' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({ method: 'GET', site: f.site, path: '/api/auth/social-apps/', query: { search: f.search, provider: f.provider, page: f.page, page_size: f['page-size'] } }),
    render: (body: ListBody) => {
      if (!body.data.length) return 'No social apps.';
      const rows = table(body.data, [
        { header: 'Id', get: (a) => a.id },
        { header: 'Provider', get: (a) => a.provider },
        { header: 'Provider id', get: (a) => a.provider_id },
        { header: 'Name', get: (a) => a.name },
        { header: 'Configured', get: (a) => a.is_configured },
        { header: 'Auto redirect', get: (a) => a.auto_redirect },
      ]);
      return [rows, `${body.total} social app${body.total === 1 ? '' : 's'} (page ${body.pagination.page} of ${body.pagination.total_pages}).`];
    },
  }),

  'social-app:create': operation({
    summary: 'Add a social login provider to a site.',
    description: 'Site superusers (the organization\'s owners and admins). The secret is stored encrypted and shown only in this answer. Providers: openid_connect (any OIDC issuer: --settings \'{"server_url": …}\'), google, microsoft (settings.tenant), gitlab, apple (settings.team_id, --key), github.',
    examples: [
      'social-app create --provider openid_connect --provider-id company --name "Company SSO" --client-id platform --secret-prompt --settings \'{"server_url": "https://sso.example.com"}\' --site shop_prod',
      'social-app create --provider github --name GitHub --client-id Iv1.abc --secret-prompt --site shop_prod --json',
    ],
    flags: { site: siteFlag, provider: Flags.string({ summary: 'The provider.', required: true }), ...fieldFlags },
    request: async ({ flags: f }) => ({ method: 'POST', site: f.site, path: '/api/auth/social-apps/', body: { provider: f.provider, ...(await fields(f)) } }),
    render: (body: Flagged<SocialAppView>) => [body.message, lines(body.data)],
  }),

  'social-app:get': operation({
    summary: 'Show a social app (its secret masked).',
    examples: ['social-app get 3 --site shop_prod'],
    args: idArg,
    flags: { site: siteFlag },
    request: ({ flags: f, args }) => ({ method: 'GET', site: f.site, path: appPath(args.id) }),
    render: lines,
  }),

  'social-app:update': operation({
    summary: 'Change a social app (PATCH: only the flags given).',
    description: '--settings replaces the settings object whole.',
    examples: ['social-app update 3 --name "Company login" --site shop_prod', 'social-app update 3 --secret-prompt --site shop_prod --json'],
    args: idArg,
    flags: { site: siteFlag, provider: Flags.string({ summary: 'Another provider.' }), ...fieldFlags },
    request: async ({ flags: f, args }) => {
      const body = defined({ provider: f.provider, ...(await fields(f)) });
      if (!Object.keys(body).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --name, --client-id, --secret(-prompt), --key, --settings, --provider-id or --provider.');
      return { method: 'PATCH', site: f.site, path: appPath(args.id), body };
    },
    render: (body: Flagged<SocialAppView>) => [body.message, lines(body.data)],
  }),

  'social-app:delete': operation({
    summary: 'Delete a social app.',
    description: 'Refused while active users are connected through it (the answer says how many).',
    examples: ['social-app delete 3 --site shop_prod'],
    args: idArg,
    flags: { site: siteFlag },
    request: ({ flags: f, args }) => ({ method: 'DELETE', site: f.site, path: appPath(args.id) }),
    render: (body: { message: string }) => body.message,
  }),
};
