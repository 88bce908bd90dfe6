// The registered social login providers (spec Part 1 §2 "Social app"; docs/social-login.md).
// Each is OpenID Connect (the ID token is the identity: issuer, audience, signature, nonce and
// expiry checked by openid-client) except GitHub, plain OAuth 2 whose identity comes from its
// API. `settings.server_url` moves a provider to another host: required for `openid_connect`
// (the issuer or its discovery document), optional elsewhere (GitLab self-managed, GitHub
// Enterprise, a sovereign cloud; the tests' local stand-ins).

export interface ProviderInfo {
  /** The `provider` value. */
  id: string;
  /** `provider_display`. */
  display: string;
  kind: 'oidc' | 'github';
  /** Where discovery starts (OIDC) or the site's base URL (GitHub), unless `settings.server_url` says otherwise. */
  defaultServer?: (settings: Record<string, unknown>) => string;
  /** Scopes asked for. */
  scope: string;
  /** Whether `provider_id` is required (several apps of the provider in one site). */
  needsProviderId: boolean;
  /** Settings keys that must be set (beside `server_url` when there is no default). */
  requiredSettings: string[];
}

export const PROVIDERS: readonly ProviderInfo[] = [
  { id: 'openid_connect', display: 'OpenID Connect', kind: 'oidc', scope: 'openid email profile', needsProviderId: true, requiredSettings: ['server_url'] },
  { id: 'google', display: 'Google', kind: 'oidc', defaultServer: () => 'https://accounts.google.com', scope: 'openid email profile', needsProviderId: false, requiredSettings: [] },
  {
    id: 'microsoft',
    display: 'Microsoft',
    kind: 'oidc',
    // The directory's issuer: a tenant ID (the multi-tenant endpoints `common`/`organizations`
    // publish a templated issuer that no ID token matches, so they are not accepted).
    defaultServer: (settings) => `https://login.microsoftonline.com/${encodeURIComponent(String(settings.tenant))}/v2.0`,
    scope: 'openid email profile',
    needsProviderId: false,
    requiredSettings: ['tenant'],
  },
  { id: 'gitlab', display: 'GitLab', kind: 'oidc', defaultServer: () => 'https://gitlab.com', scope: 'openid email profile', needsProviderId: false, requiredSettings: [] },
  // Apple: the client secret is a short-lived ES256 JWT signed with the app's private key
  // (`secret`: the .p8 key's PEM, `key`: its key ID, `settings.team_id`).
  { id: 'apple', display: 'Apple', kind: 'oidc', defaultServer: () => 'https://appleid.apple.com', scope: 'openid email name', needsProviderId: false, requiredSettings: ['team_id'] },
  { id: 'github', display: 'GitHub', kind: 'github', defaultServer: () => 'https://github.com', scope: 'read:user user:email', needsProviderId: false, requiredSettings: [] },
];

const BY_ID = new Map(PROVIDERS.map((p) => [p.id, p]));

export const providerInfo = (id: string): ProviderInfo | undefined => BY_ID.get(id);

export const PROVIDER_IDS = PROVIDERS.map((p) => p.id);

/** A provider's server: `settings.server_url` if set, else its default; undefined when neither. */
export function serverUrl(info: ProviderInfo, settings: Record<string, unknown>): string | undefined {
  const url = typeof settings.server_url === 'string' && settings.server_url ? settings.server_url : undefined;
  return url ?? info.defaultServer?.(settings);
}

/** GitHub's endpoints for a base URL: github.com's API is a host of its own; Enterprise serves it under /api/v3. */
export function githubEndpoints(base: string): { authorize: string; token: string; api: string } {
  const root = base.replace(/\/+$/, '');
  const api = new URL(root).host === 'github.com' ? 'https://api.github.com' : `${root}/api/v3`;
  return { authorize: `${root}/login/oauth/authorize`, token: `${root}/login/oauth/access_token`, api };
}
