// Site users' tokens (spec Part 1 §5 on a site host). Who may do what inside a site is the
// request's ability (auth/actor.ts, tenancy/site-access.ts).
//
// A site's users live in "<schema>".users. One with `platform_user_uuid` (the organization
// owners and admins seeded at site creation) signs in with the CURRENT password of that
// platform account, and only while the account is active and not deleted; every other site
// user has a password of their own (argon2id). Tokens carry `tenant: <schema>`:
// authenticateAccess refuses them on any other site and on the platform host, and refuses
// platform tokens here. Refresh tokens are blacklisted in the site's own token_blacklist.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Actor } from '../auth/actor.ts';
import { RefreshRequest, TokenRequest, type TokenPair } from '../auth/auth.service.ts';
import { verifyPassword } from '../auth/passwords.ts';
import { signToken, verifyToken, type TokenSettings } from '../auth/tokens.ts';
import { validate } from '../common/validation.ts';
import { invalidToken, notAuthenticated } from '../errors.ts';
import { selectUserRow } from '../users/user.queries.ts';
import { withLinkedAccount } from './linked-users.ts';
import { quotedSchema } from './schema.ts';

const BAD_CREDENTIALS = 'No active account found with the given credentials.';

interface LoginRow {
  uuid: string;
  username: string;
  password: string | null;
  usable: boolean;
  token_generation: number;
  platform_user_uuid: string | null;
}

// The password is the linked platform account's when there is one (read at each login, so a
// platform password change applies at once); usable = the site user is active and not
// deleted and, if linked, its platform account is an active owner or admin of the site's
// organization (linked-users.ts: removal and demotion apply at once).
const loginSql = (schema: string, by: 'username' | 'email') => `
  SELECT u.uuid, u.username, u.password, u.is_active AND NOT u.is_deleted AS usable, u.token_generation, u.platform_user_uuid
    FROM ${quotedSchema(schema)}.users u
   WHERE lower(u.${by}) = ? AND NOT u.is_deleted${by === 'email' ? ` AND u.email <> ''` : ''}`;

/**
 * A site user's sign-in (the token route and browser sessions on the site): the usable user a
 * username (or e-mail) and password name, its last_login stamped; 401 otherwise.
 */
export async function siteSignIn(em: EntityManager, schema: string, rawInput: unknown): Promise<{ uuid: string; username: string; token_generation: number }> {
  const input = validate(TokenRequest, rawInput);
  const login = input.username.trim().toLowerCase();
  const conn = em.getConnection();
  let found = (await conn.execute(loginSql(schema, 'username'), [login], 'get')) as LoginRow | undefined;
  if (!found && login.includes('@')) found = (await conn.execute(loginSql(schema, 'email'), [login], 'get')) as LoginRow | undefined;
  const user = found && (await withLinkedAccount(em, schema, found));
  const ok = await verifyPassword((user?.platform_user_uuid ? user.platform_password : user?.password) ?? undefined, input.password);
  if (!ok || !user?.usable || !user.standing) throw notAuthenticated(BAD_CREDENTIALS);
  await conn.execute(`UPDATE ${quotedSchema(schema)}.users SET last_login = now() WHERE uuid = ?`, [user.uuid]);
  return { uuid: user.uuid, username: user.username, token_generation: user.token_generation };
}

/** POST /api/auth/jwt/token/ on a site: the site's users, tokens bound to the site. */
export async function issueTenantTokens(em: EntityManager, settings: TokenSettings, schema: string, rawInput: unknown): Promise<TokenPair> {
  return siteTokenPair(settings, schema, await siteSignIn(em, schema, rawInput));
}

/** The access and refresh tokens of a site user, valid on that site only (password and social sign-in). */
export function siteTokenPair(settings: TokenSettings, schema: string, subject: { uuid: string; token_generation: number }): TokenPair {
  return { access: signToken(settings, 'access', subject, schema), refresh: signToken(settings, 'refresh', subject, schema) };
}

function refreshClaims(settings: TokenSettings, schema: string, rawInput: unknown) {
  const { refresh } = validate(RefreshRequest, rawInput);
  const claims = verifyToken(settings, refresh, 'refresh');
  if (claims.tenant !== schema) throw invalidToken('Token is not valid on this host.');
  return claims;
}

/** POST /api/auth/jwt/token/refresh/ on a site. */
export async function refreshTenantAccess(em: EntityManager, settings: TokenSettings, schema: string, rawInput: unknown): Promise<{ access: string }> {
  const claims = refreshClaims(settings, schema, rawInput);
  const conn = em.getConnection();
  if (await conn.execute(`SELECT 1 FROM ${quotedSchema(schema)}.token_blacklist WHERE jti = ?`, [claims.jti], 'get')) {
    throw invalidToken('Token is blacklisted.');
  }
  const user = await selectUserRow(em, claims.sub, schema);
  if (!user || !user.is_active || user.is_deleted) throw invalidToken('User is inactive or deleted.');
  if (user.token_generation !== claims.gen) throw invalidToken('Token has been revoked.');
  return { access: signToken(settings, 'access', user, schema) };
}

/** POST /api/auth/jwt/token/blacklist/ on a site: into that site's blacklist. */
export async function blacklistTenantRefresh(em: EntityManager, settings: TokenSettings, schema: string, rawInput: unknown): Promise<void> {
  const claims = refreshClaims(settings, schema, rawInput);
  const q = quotedSchema(schema);
  await em.getConnection().execute(
    `INSERT INTO ${q}.token_blacklist (jti, user_uuid, expires_at) SELECT ?, uuid, ? FROM ${q}.users WHERE uuid = ? ON CONFLICT (jti) DO NOTHING`,
    [claims.jti, new Date(claims.exp * 1000), claims.sub],
  );
}

/** How an actor is named in audit records. */
export const actorLabel = (actor: Actor): string => (actor.kind === 'user' ? actor.username : `system:${actor.name}`);
