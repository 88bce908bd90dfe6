// Site users' tokens (spec Part 1 §5 on a site host) and who may do what inside a site.
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
import type { ServiceContext } from '../context.ts';
import { invalidToken, notAuthenticated, notFound, permissionDenied } from '../errors.ts';
import { selectUserRow } from '../users/user.queries.ts';
import { LINKED_STANDING_SQL } from './linked-users.ts';
import { assertSchemaName, quotedSchema } from './schema.ts';

const BAD_CREDENTIALS = 'No active account found with the given credentials.';

interface LoginRow {
  uuid: string;
  password: string | null;
  usable: boolean;
  token_generation: number;
}

// The password is the linked platform account's when there is one (read at each login, so a
// platform password change applies at once); usable = the site user is active and not
// deleted and, if linked, its platform account is an active owner or admin of the site's
// organization (linked-users.ts: removal and demotion apply at once).
const loginSql = (schema: string, by: 'username' | 'email') => `
  SELECT u.uuid,
         CASE WHEN u.platform_user_uuid IS NULL THEN u.password ELSE p.password END AS password,
         u.is_active AND NOT u.is_deleted AND ${LINKED_STANDING_SQL} AS usable,
         u.token_generation + coalesce(p.token_generation, 0) AS token_generation
    FROM ${quotedSchema(schema)}.users u LEFT JOIN public.users p ON p.uuid = u.platform_user_uuid
   WHERE lower(u.${by}) = ? AND NOT u.is_deleted${by === 'email' ? ` AND u.email <> ''` : ''}`;

/** POST /api/auth/jwt/token/ on a site: the site's users, tokens bound to the site. */
export async function issueTenantTokens(em: EntityManager, settings: TokenSettings, schema: string, rawInput: unknown): Promise<TokenPair> {
  const input = validate(TokenRequest, rawInput);
  const login = input.username.trim().toLowerCase();
  const conn = em.getConnection();
  let user = (await conn.execute(loginSql(schema, 'username'), [schema, login], 'get')) as LoginRow | undefined;
  if (!user && login.includes('@')) user = (await conn.execute(loginSql(schema, 'email'), [schema, login], 'get')) as LoginRow | undefined;
  const ok = await verifyPassword(user?.password ?? undefined, input.password);
  if (!ok || !user?.usable) throw notAuthenticated(BAD_CREDENTIALS);
  await conn.execute(`UPDATE ${quotedSchema(schema)}.users SET last_login = now() WHERE uuid = ?`, [user.uuid]);
  const subject = { uuid: user.uuid, token_generation: Number(user.token_generation) };
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

/**
 * The site schema a tenant service works in: ctx.tenant (host routing or the CLI's --site),
 * never a name from the request. A user actor must be a user of that very site.
 */
export function siteSchema(ctx: ServiceContext): string {
  if (ctx.tenant === null) throw notFound({ message: 'Only available on a site host.' });
  if (ctx.actor.kind === 'user' && ctx.actor.tenant !== ctx.tenant) throw permissionDenied();
  return assertSchemaName(ctx.tenant);
}

/** Site administrators: the site's superusers and staff (and the CLI's system actor). */
export function isSiteAdmin(actor: Actor): boolean {
  return actor.kind === 'system' || actor.is_superuser || actor.is_staff;
}

/** The schema, if the caller administers this site; 403 otherwise. */
export function requireSiteAdmin(ctx: ServiceContext): string {
  const schema = siteSchema(ctx);
  if (!isSiteAdmin(ctx.actor)) throw permissionDenied();
  return schema;
}

// Whether a site user holds a permission (`view_secret`, …) directly or through a group.
const permissionSql = (q: string) => `
  SELECT 1 FROM ${q}.permissions p
   WHERE p.codename = ?
     AND (EXISTS (SELECT 1 FROM ${q}.user_permissions up WHERE up.permission_id = p.id AND up.user_uuid = ?)
       OR EXISTS (SELECT 1 FROM ${q}.user_groups ug JOIN ${q}.group_permissions gp ON gp.group_id = ug.group_id
                   WHERE gp.permission_id = p.id AND ug.user_uuid = ?))`;

/**
 * The schema, if the caller administers this site or holds `codename` there (directly or
 * through one of the site's groups, e.g. the seeded Editors hold the secret permissions); 403 otherwise.
 */
export async function requireSitePermission(ctx: ServiceContext, codename: string): Promise<string> {
  const schema = siteSchema(ctx);
  if (isSiteAdmin(ctx.actor) || ctx.actor.kind !== 'user') return schema;
  const held = await ctx.em.getConnection().execute(permissionSql(quotedSchema(schema)), [codename, ctx.actor.uuid, ctx.actor.uuid], 'get');
  if (!held) throw permissionDenied();
  return schema;
}

/** How an actor is named in audit records. */
export const actorLabel = (actor: Actor): string => (actor.kind === 'user' ? actor.username : `system:${actor.name}`);
