// Headless social login (spec Part 1 §4; docs/social-login.md):
//   GET  /api/auth/{provider}/redirect/?redirect_uri=…  → the provider's authorization URL, with
//        state, nonce and a PKCE S256 challenge; the state, nonce, verifier and redirect URI are
//        kept server-side (social_login_states, the state hashed), for 10 minutes, once;
//   POST /api/auth/{provider}/token/ {code, state}      → the code exchanged (openid-client: the
//        ID token's issuer, audience, nonce and expiry checked, and its signature against the
//        provider's JWKS: enableNonRepudiationChecks, without which openid-client skips it for
//        token-endpoint ID tokens), the provider identity mapped to a site user, the platform's
//        tokens for that site.
// Every request to the provider (discovery, JWKS, token, userinfo, GitHub's API) goes through
// the outbound guard (net/outbound.ts): a server_url naming an internal host is never reached.
// Who the identity becomes: the user already connected to it; else the user whose e-mail it
// carries, only when both sides vouch for that address (the provider verified it, and the
// site's record of it is trusted: users.email_verified); else a new user — with the address only
// if the provider verified it. An unverified address that matches a user is refused: never a
// second account, never an attachment.
import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type JsonWebToken from 'jsonwebtoken';
import { lazyRequire } from '../common/lazy-require.ts';
// openid-client (with oauth4webapi and jose) is loaded by the first sign-in, not with the app.
import type { Configuration, TokenEndpointResponse, TokenEndpointResponseHelpers } from 'openid-client';
import type { TokenPair } from '../auth/auth.service.ts';
import type { TokenSettings } from '../auth/tokens.ts';
import { slugify } from '../common/slug.ts';
import { firstRow, rows } from '../db/sql.ts';
import { DomainError, validationError } from '../errors.ts';
import { OutboundError, type OutboundGuard } from '../net/outbound.ts';
import type { SecretKeyring } from '../secrets/crypto.ts';
import { withLinkedAccount } from '../tenancy/linked-users.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { siteTokenPair } from '../tenancy/tenant-auth.ts';
import { insertSiteUser } from '../tenancy/tenant-users.service.ts';
import type { UserEvents } from '../functions/events.service.ts';
import { githubEndpoints, providerInfo, serverUrl, type ProviderInfo } from './providers.ts';
import { appByLoginKey, openSecret, type SocialAppRow } from './social-app.service.ts';

const jwt = lazyRequire<typeof JsonWebToken>('jsonwebtoken');

export interface SocialLoginOptions {
  keyring: SecretKeyring;
  tokens: TokenSettings;
  /** Allow http:// provider URLs (development and the tests' local providers); https only otherwise. */
  allowHttp: boolean;
  /** Every request to a provider goes through it (its rules: OUTBOUND_*; its deadline bounds each request). */
  outbound: OutboundGuard;
  /** The site's user-creation events (a new user made by a sign-in publishes them). */
  events?: UserEvents;
}

const STATE_TTL_SECONDS = 600;
const CONFIG_TTL_MS = 10 * 60_000;
const hashState = (state: string): Buffer => createHash('sha256').update(state).digest();

const badRequest = (message: string) => new DomainError('BAD_REQUEST', message);
/** The provider failed or refused: 400 for what the caller sent (a bad or used code), never its secrets. */
const providerRefused = (what: string) => badRequest(`The provider refused the sign-in: ${what}.`);

/** The guard's refusal somewhere in an error's causes (openid-client wraps what its fetch throws). */
function outboundCause(err: unknown): OutboundError | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) if (e instanceof OutboundError) return e;
  return undefined;
}

/** What a failed request to the provider answers: the guard's refusal 400 (the app's configuration), too many in flight 503, else 502. */
function providerUnreachable(app: SocialAppRow, what: string, err: unknown): DomainError {
  const out = outboundCause(err);
  if (out?.reason === 'refused') return badRequest(`Social app "${app.name}": ${out.message}`);
  if (out?.reason === 'busy') return new DomainError('SERVICE_UNAVAILABLE', out.message);
  return new DomainError('BAD_GATEWAY', `${what} of social app "${app.name}" could not be read: ${(out ?? (err as Error)).message}`);
}

// ---- the provider's configuration ------------------------------------------------------------

/** One entry per app (`schema:id`), replaced when the app's provider, credentials or settings change. */
const configs = new Map<string, { config: Configuration; version: string; at: number }>();

/** openid-client's Configuration for an app (OIDC: from discovery), cached 10 minutes. */
async function configFor(schema: string, app: SocialAppRow, info: ProviderInfo, options: SocialLoginOptions): Promise<Configuration> {
  const server = serverUrl(info, app.settings);
  if (!server) throw badRequest(`Social app "${app.name}" is not configured (no server_url).`);
  const url = new URL(server);
  if (url.protocol !== 'https:' && !(options.allowHttp && url.protocol === 'http:')) throw badRequest(`Social app "${app.name}": the provider must be reached over https.`);
  const cacheKey = `${schema}:${app.id}`;
  const version = `${app.provider}:${app.client_id}:${app.key}:${app.secret_ciphertext}:${JSON.stringify(app.settings)}`;
  const cached = configs.get(cacheKey);
  // Apple's client secret is a JWT of 5 minutes: signed again for each sign-in.
  if (cached && cached.version === version && Date.now() - cached.at < CONFIG_TTL_MS && info.id !== 'apple') return cached.config;
  const oidc = await import('openid-client');
  const guarded = options.outbound.fetchFor(schema);
  const secret = openSecret(options.keyring, schema, app);
  const auth = oidc.ClientSecretPost(info.id === 'apple' ? appleClientSecret(app, secret) : secret);
  let config: Configuration;
  if (info.kind === 'github') {
    const ep = githubEndpoints(server);
    config = new oidc.Configuration({ issuer: server, authorization_endpoint: ep.authorize, token_endpoint: ep.token }, app.client_id, undefined, auth);
    config[oidc.customFetch] = guarded;
  } else {
    try {
      config = await oidc.discovery(url, app.client_id, undefined, auth, { execute: url.protocol === 'http:' ? [oidc.allowInsecureRequests] : [], [oidc.customFetch]: guarded });
    } catch (err) {
      throw providerUnreachable(app, 'The discovery document', err);
    }
    // The ID token of the token endpoint is verified against the provider's JWKS (fetched through
    // the guard; cached 5 minutes with the configuration, fetched again for an unknown key ID).
    oidc.enableNonRepudiationChecks(config);
  }
  if (url.protocol === 'http:') oidc.allowInsecureRequests(config);
  configs.set(cacheKey, { config, version, at: Date.now() });
  return config;
}

/** Apple's client secret: an ES256 JWT (5 minutes) signed with the app's private key, `key` its key ID. */
function appleClientSecret(app: SocialAppRow, privateKey: string): string {
  try {
    return jwt().sign({ sub: app.client_id }, privateKey, {
      algorithm: 'ES256',
      keyid: app.key,
      issuer: String(app.settings.team_id),
      audience: serverUrl(providerInfo('apple')!, app.settings),
      expiresIn: 300,
    });
  } catch {
    throw badRequest(`Social app "${app.name}": the secret is not a valid ES256 private key (Apple's .p8 key).`);
  }
}

function appInfo(app: SocialAppRow): ProviderInfo {
  const info = providerInfo(app.provider);
  if (!info) throw badRequest(`Social app "${app.name}" names an unknown provider.`);
  return info;
}

// ---- redirect ---------------------------------------------------------------------------------

function checkRedirectUri(value: unknown, allowHttp: boolean): string {
  if (typeof value !== 'string' || !value) throw validationError({ redirect_uri: ['This field is required: the URL the provider sends the code back to.'] });
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw validationError({ redirect_uri: ['Not a valid URL.'] });
  }
  const local = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (!(url.protocol === 'https:' || (url.protocol === 'http:' && (local || allowHttp))) || url.hash) {
    throw validationError({ redirect_uri: ['An https URL (http only for localhost) without a fragment.'] });
  }
  return url.toString();
}

export interface RedirectResult {
  authorization_url: string;
  state: string;
  provider: string;
  expires_in: number;
}

export async function socialRedirect(em: EntityManager, schema: string, loginKey: string, query: { redirect_uri?: unknown }, requestedBy: string | null, options: SocialLoginOptions): Promise<RedirectResult> {
  const app = await appByLoginKey(em, schema, loginKey);
  const info = appInfo(app);
  const redirectUri = checkRedirectUri(query.redirect_uri, options.allowHttp);
  const config = await configFor(schema, app, info, options);
  const oidc = await import('openid-client');
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const verifier = oidc.randomPKCECodeVerifier();
  const params: Record<string, string> = {
    redirect_uri: redirectUri,
    scope: info.scope,
    state,
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
  };
  if (info.kind === 'oidc') params.nonce = nonce;
  const q = quotedSchema(schema);
  // One statement: the expired states of the site go as the new one is kept.
  await rows(
    em,
    `WITH expired AS (DELETE FROM ${q}.social_login_states WHERE expires_at < now())
     INSERT INTO ${q}.social_login_states (state_hash, social_app_id, nonce, code_verifier, redirect_uri, requested_by, expires_at)
     VALUES (?, ?, ?, ?, ?, ?, now() + make_interval(secs => ?))`,
    [hashState(state), app.id, nonce, verifier, redirectUri, requestedBy, STATE_TTL_SECONDS],
  );
  return { authorization_url: oidc.buildAuthorizationUrl(config, params).toString(), state, provider: loginKey, expires_in: STATE_TTL_SECONDS };
}

// ---- token ------------------------------------------------------------------------------------

interface Identity {
  issuer: string;
  subject: string;
  email: string;
  emailVerified: boolean;
  username: string;
  firstName: string;
  lastName: string;
  extra: Record<string, unknown>;
}

interface StateRow {
  nonce: string;
  code_verifier: string;
  redirect_uri: string;
  expired: boolean;
}

export interface SocialTokenResult extends TokenPair {
  user: { uuid: string; username: string; email: string };
  created: boolean;
}

export async function socialToken(em: EntityManager, schema: string, loginKey: string, body: unknown, options: SocialLoginOptions): Promise<SocialTokenResult> {
  const input = (body && typeof body === 'object' ? body : {}) as Record<string, unknown>;
  const errors: Record<string, string[]> = {};
  for (const field of ['code', 'state'] as const) {
    if (typeof input[field] !== 'string' || !input[field]) errors[field] = ['This field is required.'];
    else if ((input[field] as string).length > 2048) errors[field] = ['Ensure this field has no more than 2048 characters.'];
  }
  if (input.iss !== undefined && typeof input.iss !== 'string') errors.iss = ['Not a valid string.'];
  if (Object.keys(errors).length) throw validationError(errors);
  const code = input.code as string;
  const state = input.state as string;
  const app = await appByLoginKey(em, schema, loginKey);
  const info = appInfo(app);
  // Single use: the state row is gone whatever happens next (a replayed code finds nothing).
  const row = await firstRow<StateRow>(
    em,
    `DELETE FROM ${quotedSchema(schema)}.social_login_states WHERE state_hash = ? AND social_app_id = ?
     RETURNING nonce, code_verifier, redirect_uri, expires_at < now() AS expired`,
    [hashState(state), app.id],
  );
  if (!row || row.expired) throw badRequest('Invalid or expired state: start the sign-in again (GET …/redirect/).');
  const config = await configFor(schema, app, info, options);
  const callback = new URL(row.redirect_uri);
  callback.searchParams.set('code', code);
  callback.searchParams.set('state', state);
  // RFC 9207: the issuer the code came from. The state is bound to this app server-side, so a
  // client that does not relay `iss` gets the app's own (a different one is refused).
  if (info.kind === 'oidc' && config.serverMetadata().authorization_response_iss_parameter_supported) {
    callback.searchParams.set('iss', typeof input.iss === 'string' ? input.iss : config.serverMetadata().issuer);
  }
  let identity: Identity;
  try {
    const oidc = await import('openid-client');
    const tokens = await oidc.authorizationCodeGrant(config, callback, {
      pkceCodeVerifier: row.code_verifier,
      expectedState: state,
      ...(info.kind === 'oidc' ? { expectedNonce: row.nonce, idTokenExpected: true } : {}),
    });
    identity = info.kind === 'github' ? await githubIdentity(app, tokens.access_token, options.outbound.fetchFor(schema)) : await oidcIdentity(config, tokens);
  } catch (err) {
    if (err instanceof DomainError) throw err;
    if (outboundCause(err)) throw providerUnreachable(app, 'A response of the provider', err);
    const e = err as { error?: string; error_description?: string; message?: string };
    throw providerRefused(e.error ? `${e.error}${e.error_description ? ` (${e.error_description})` : ''}` : (e.message ?? 'unknown error'));
  }
  return em.transactional(async (tx) => {
    const { uuid, created } = await connectUser(tx as EntityManager, schema, app, identity, options.events);
    return { ...(await signedIn(tx as EntityManager, schema, uuid, options.tokens)), created };
  });
}

async function oidcIdentity(config: Configuration, tokens: TokenEndpointResponse & TokenEndpointResponseHelpers): Promise<Identity> {
  const claims = tokens.claims();
  if (!claims) throw providerRefused('no ID token');
  let profile: Record<string, unknown> = claims as Record<string, unknown>;
  if (claims.email === undefined && config.serverMetadata().userinfo_endpoint) {
    const oidc = await import('openid-client');
    profile = { ...(await oidc.fetchUserInfo(config, tokens.access_token, claims.sub)), ...claims };
  }
  const str = (k: string) => (typeof profile[k] === 'string' ? (profile[k] as string) : '');
  return {
    issuer: claims.iss,
    subject: claims.sub,
    email: str('email').trim(),
    // Apple sends the flag as a string.
    emailVerified: profile.email_verified === true || profile.email_verified === 'true',
    username: str('preferred_username') || str('nickname'),
    firstName: str('given_name'),
    lastName: str('family_name'),
    extra: { name: str('name') || undefined, picture: str('picture') || undefined },
  };
}

/** GitHub has no ID token: the user and their verified primary e-mail from its API. */
async function githubIdentity(app: SocialAppRow, accessToken: string, guarded: typeof fetch): Promise<Identity> {
  const { api } = githubEndpoints(serverUrl(providerInfo('github')!, app.settings)!);
  const get = async (path: string) => {
    const res = await guarded(`${api}${path}`, {
      headers: { Authorization: `Bearer ${accessToken}`, Accept: 'application/vnd.github+json', 'User-Agent': 'platform-social-login' },
    });
    if (!res.ok) throw providerRefused(`GitHub API ${path} answered ${res.status}`);
    return res.json() as Promise<unknown>;
  };
  const user = (await get('/user')) as { id?: number; login?: string; name?: string; avatar_url?: string };
  if (typeof user.id !== 'number') throw providerRefused('GitHub returned no user id');
  const emails = (await get('/user/emails')) as { email: string; primary: boolean; verified: boolean }[];
  const primary = Array.isArray(emails) ? (emails.find((e) => e.primary && e.verified) ?? emails.find((e) => e.primary)) : undefined;
  const [first, ...rest] = (user.name ?? '').split(' ');
  return {
    issuer: api,
    subject: String(user.id),
    email: primary?.email ?? '',
    emailVerified: primary?.verified === true,
    username: user.login ?? '',
    firstName: first ?? '',
    lastName: rest.join(' '),
    extra: { login: user.login, avatar_url: user.avatar_url },
  };
}

// ---- the site user ----------------------------------------------------------------------------

interface UserMatch {
  uuid: string;
  email_verified: boolean;
  usable: boolean;
}

const refused = (message: string) => new DomainError('PERMISSION_DENIED', message);

/**
 * The site user the identity signs in as — connected, auto-connected by a trusted e-mail, or new —
 * with the connection recorded; in `em`'s transaction (a user made here goes if anything fails).
 */
async function connectUser(em: EntityManager, schema: string, app: SocialAppRow, id: Identity, events: UserEvents | undefined): Promise<{ uuid: string; created: boolean }> {
  const q = quotedSchema(schema);
  const match = async (from: string, where: string, params: unknown[]): Promise<UserMatch | undefined> => {
    const row = await firstRow<UserMatch & { token_generation: number; platform_user_uuid: string | null }>(
      em,
      `SELECT u.uuid, u.email_verified, u.is_active AND NOT u.is_deleted AS usable, u.token_generation, u.platform_user_uuid FROM ${from} WHERE ${where}`,
      params,
    );
    const linked = row && (await withLinkedAccount(em, schema, row));
    return linked && { uuid: linked.uuid, email_verified: linked.email_verified, usable: linked.usable && linked.standing };
  };
  let user = await match(`${q}.social_accounts a JOIN ${q}.users u ON u.uuid = a.user_uuid`, 'a.social_app_id = ? AND a.subject = ?', [app.id, id.subject]);
  if (!user && id.email) {
    user = await match(`${q}.users u`, "lower(u.email) = lower(?) AND u.email <> '' AND NOT u.is_deleted", [id.email]);
    if (user && !id.emailVerified) throw refused('An account with this e-mail address exists, and the provider has not verified the address: sign in with that account instead.');
    if (user && !user.email_verified) {
      throw refused('An account with this e-mail address exists, but its address was never verified: sign in with that account (or have an administrator confirm its address) first.');
    }
  }
  if (user && !user.usable) throw refused('This account is inactive.');
  const created = !user;
  const uuid = user?.uuid ?? (await createSocialUser(em, schema, id, events));
  // Recorded, or refreshed when already connected; a concurrent first sign-in that connected the
  // identity to another user leaves no row to return.
  const recorded = await firstRow(
    em,
    `INSERT INTO ${q}.social_accounts (social_app_id, user_uuid, issuer, subject, email, email_verified, extra_data) VALUES (?, ?, ?, ?, ?, ?, ?::jsonb)
     ON CONFLICT (social_app_id, subject) DO UPDATE SET last_login = now(), email = EXCLUDED.email, email_verified = EXCLUDED.email_verified, extra_data = EXCLUDED.extra_data
       WHERE social_accounts.user_uuid = EXCLUDED.user_uuid
     RETURNING id`,
    [app.id, uuid, id.issuer, id.subject, id.email, id.emailVerified, JSON.stringify(id.extra)],
  );
  if (!recorded) throw new DomainError('CONFLICT', 'This identity was connected by a concurrent sign-in: try again.');
  return { uuid, created };
}

/**
 * A new site user for the identity: no password (social sign-in only until one is set), the
 * e-mail only when the provider verified it — an unverified address would let whoever typed it
 * at the provider be auto-connected to later sign-ins of its real owner.
 */
async function createSocialUser(em: EntityManager, schema: string, id: Identity, events: UserEvents | undefined): Promise<string> {
  const email = id.emailVerified ? id.email : '';
  const base = slugify(id.username || id.email.split('@')[0] || `${id.firstName} ${id.lastName}` || 'user', 140) || 'user';
  const user = { username: base, email, first_name: id.firstName.slice(0, 150), last_name: id.lastName.slice(0, 150), is_active: true, is_staff: false, is_superuser: false };
  const created = await insertSiteUser(em, schema, { base }, user, async (tx, username) =>
    (await firstRow<{ uuid: string }>(
      tx,
      `INSERT INTO ${quotedSchema(schema)}.users (uuid, username, email, email_verified, password, first_name, last_name, is_active)
       VALUES (gen_random_uuid(), ?, ?, ?, NULL, ?, ?, true) RETURNING uuid`,
      [username, email, email !== '', user.first_name, user.last_name],
    ))!,
  { events, invokedBy: null });
  return created.uuid;
}

/** The sign-in recorded on the user (last_login) and the site's tokens for it. */
async function signedIn(em: EntityManager, schema: string, uuid: string, settings: TokenSettings): Promise<TokenPair & { user: SocialTokenResult['user'] }> {
  const row = await withLinkedAccount(
    em,
    schema,
    (await firstRow<{ uuid: string; username: string; email: string; token_generation: number; platform_user_uuid: string | null }>(
      em,
      `UPDATE ${quotedSchema(schema)}.users SET last_login = now() WHERE uuid = ? RETURNING uuid, username, email, token_generation, platform_user_uuid`,
      [uuid],
    ))!,
  );
  return { ...siteTokenPair(settings, schema, { uuid: row.uuid, token_generation: Number(row.token_generation) }), user: { uuid: row.uuid, username: row.username, email: row.email } };
}
