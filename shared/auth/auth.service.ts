// Token issue, refresh, blacklist (spec Part 1 §5) and bearer authentication.
import { Type, type Static } from '@sinclair/typebox';
import type { EntityManager } from '@mikro-orm/postgresql';
import { validate } from '../common/validation.ts';
import { notAuthenticated, invalidToken } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { BlacklistedToken, User, type UserEntity } from '../users/user.entity.ts';
import { emailIs, selectUserRow, toUserView, usernameIs, type UserRow } from '../users/user.queries.ts';
import { defineAbility, type AppAbility, type UserActor } from './actor.ts';
import type { CachedLookup } from '../common/cached-lookup.ts';
import { verifyPassword } from './passwords.ts';
import { signToken, verifyToken, type TokenSettings } from './tokens.ts';

export const TokenRequest = Type.Object(
  { username: Type.String({ minLength: 1, maxLength: 254 }), password: Type.String({ minLength: 1, maxLength: 128 }) },
  { additionalProperties: false },
);
export const RefreshRequest = Type.Object({ refresh: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false });
export const TokenPair = Type.Object({ access: Type.String(), refresh: Type.String() });
export const AccessToken = Type.Object({ access: Type.String() });
export type TokenPair = Static<typeof TokenPair>;

const BAD_CREDENTIALS = 'No active account found with the given credentials.';

const usable = (u: UserEntity | null): u is UserEntity => !!u && u.is_active && !u.is_deleted;

/**
 * A platform user's sign-in (the token route and browser sessions): the usable user a username
 * (or e-mail) and password name, its last_login stamped; 401 otherwise.
 */
export async function platformSignIn(em: EntityManager, rawInput: unknown): Promise<UserEntity> {
  const input = validate(TokenRequest, rawInput);
  const login = input.username.trim();
  // Username first, then e-mail; both case-insensitive through the lower() unique indexes.
  let user = await em.findOne(User, { ...usernameIs(login), is_deleted: false } as never, { populate: ['password'] });
  if (!user && login.includes('@')) {
    user = await em.findOne(User, { ...emailIs(login), email: { $ne: '' }, is_deleted: false } as never, { populate: ['password'] });
  }
  const ok = await verifyPassword(user?.password, input.password);
  if (!ok || !usable(user)) throw notAuthenticated(BAD_CREDENTIALS);
  user.last_login = new Date();
  await em.flush();
  return user;
}

/** POST /api/auth/jwt/token/: a username (or e-mail) and password give an access and a refresh token. */
export async function issueTokens(em: EntityManager, settings: TokenSettings, rawInput: unknown): Promise<TokenPair> {
  const user = await platformSignIn(em, rawInput);
  return { access: signToken(settings, 'access', user), refresh: signToken(settings, 'refresh', user) };
}

/** The token's user as a plain row (one lean query: this runs on every authenticated request). */
async function userForToken(em: EntityManager, sub: string, gen: number) {
  const user = await selectUserRow(em, sub);
  if (!user || !user.is_active || user.is_deleted) throw invalidToken('User is inactive or deleted.');
  if (user.token_generation !== gen) throw invalidToken('Token has been revoked.');
  return user;
}

/** POST /api/auth/jwt/token/refresh/: a valid, unrevoked refresh token gives a new access token. */
export async function refreshAccess(em: EntityManager, settings: TokenSettings, rawInput: unknown): Promise<{ access: string }> {
  const { refresh } = validate(RefreshRequest, rawInput);
  const claims = verifyToken(settings, refresh, 'refresh');
  if (claims.tenant !== null) throw invalidToken('Token is not valid on this host.');
  if (await em.count(BlacklistedToken, { jti: claims.jti })) throw invalidToken('Token is blacklisted.');
  const user = await userForToken(em, claims.sub, claims.gen);
  return { access: signToken(settings, 'access', user) };
}

/** POST /api/auth/jwt/token/blacklist/: the refresh token can no longer be used (logout). */
export async function blacklistRefresh(em: EntityManager, settings: TokenSettings, rawInput: unknown): Promise<void> {
  const { refresh } = validate(RefreshRequest, rawInput);
  const claims = verifyToken(settings, refresh, 'refresh');
  if (claims.tenant !== null) throw invalidToken('Token is not valid on this host.');
  await em
    .createQueryBuilder(BlacklistedToken)
    .insert({ jti: claims.jti, user_uuid: claims.sub, expires_at: new Date(claims.exp * 1000), blacklisted_at: new Date() })
    .onConflict('jti')
    .ignore()
    .execute();
}

/**
 * What authentication knows of a user (a platform user, or a site's own user on its site): its
 * actor and ability for requests, and the state a token is checked against. Cached per process
 * (common/request-caches.ts) until a change to the user, its platform account or its membership.
 */
export interface UserAuth {
  actor: UserActor;
  ability: AppAbility;
  usable: boolean;
  generation: number;
  /** A linked site user's platform account (whose changes reach it too). */
  linked: string | null;
}

async function loadUserAuth(em: EntityManager, sub: string, tenant: string | null): Promise<UserAuth | null> {
  const user = await selectUserRow(em, sub, tenant);
  if (!user) return null;
  const actor = userActor(user, tenant);
  return { actor, ability: defineAbility(actor), usable: user.is_active && !user.is_deleted, generation: user.token_generation, linked: user.platform_user_uuid ?? null };
}

function userActor(user: Required<UserRow>, tenant: string | null): UserActor {
  return { kind: 'user', uuid: user.uuid, username: user.username, is_superuser: user.is_superuser, is_staff: user.is_staff, user: toUserView(user), tenant };
}

/**
 * The auth state of a token's or a session's user (`sub` on this host), if the user is still
 * usable and its token generation is still `gen`: from the per-process cache when given.
 */
export async function currentUserAuth(em: EntityManager, sub: string, gen: number, tenant: string | null, cache?: CachedLookup<UserAuth | null>): Promise<UserAuth> {
  const load = () => loadUserAuth(em, sub, tenant);
  const auth = await (cache ? cache.get(`${tenant ?? ''}|${sub}`, load) : load());
  if (!auth?.usable) throw invalidToken('User is inactive or deleted.');
  if (auth.generation !== gen) throw invalidToken('Token has been revoked.');
  return auth;
}

/** Bearer authentication: the actor (and its ability) of a valid access token whose user is still active. */
export async function authenticateAccess(
  em: EntityManager,
  settings: TokenSettings,
  token: string,
  tenant: string | null,
  cache?: CachedLookup<UserAuth | null>,
): Promise<UserAuth> {
  const claims = verifyToken(settings, token, 'access');
  if (claims.tenant !== tenant) throw invalidToken('Token is not valid on this host.');
  return currentUserAuth(em, claims.sub, claims.gen, tenant, cache);
}

/**
 * The actor of an operator command run as a named user (`platform … --direct --as <username>`):
 * the platform user, or on a site that site's own user, if active now. In process only: no
 * request from the network can ask for it (server/http/auth.ts: DIRECT_ACTOR).
 */
export async function actorNamed(em: EntityManager, username: string, tenant: string | null): Promise<UserActor> {
  const table = tenant ? `${quotedSchema(tenant)}.users` : 'public.users';
  const found = (await em.getConnection().execute(`SELECT uuid FROM ${table} WHERE lower(username) = ? AND NOT is_deleted`, [username.toLowerCase()], 'get')) as
    | { uuid: string }
    | undefined;
  const user = found && (await selectUserRow(em, found.uuid, tenant));
  if (!user || !user.is_active) throw notAuthenticated(`No active user "${username}" ${tenant ? `in site ${tenant}` : 'on the platform'} (--as).`);
  return userActor(user, tenant);
}

/** Blacklist tables pruned per statement (one DELETE each, joined in one WITH). */
const PRUNE_BATCH = 100;

/**
 * Deletes the blacklist rows whose tokens have expired anyway: the platform's and every site
 * schema's (the schemas of public.sites that have the table), one DELETE per table, batched
 * into a few statements. Returns how many rows went.
 */
export async function pruneBlacklist(em: EntityManager, platform = true): Promise<number> {
  // The sites of `em`'s cluster (their schema versions are kept there: db/clusters.ts); the platform's own on the primary.
  const sites = await em.execute(`SELECT schema_name FROM public.tenant_schemas WHERE to_regclass(format('%I.token_blacklist', schema_name)) IS NOT NULL ORDER BY schema_name`);
  const tables = [...(platform ? ['public.token_blacklist'] : []), ...sites.map((s) => `${quotedSchema(s.schema_name as string)}.token_blacklist`)];
  let deleted = 0;
  for (let i = 0; i < tables.length; i += PRUNE_BATCH) {
    const batch = tables.slice(i, i + PRUNE_BATCH);
    const ctes = batch.map((t, j) => `d${j} AS (DELETE FROM ${t} WHERE expires_at < now() RETURNING 1)`);
    const [row] = await em.execute(`WITH ${ctes.join(', ')} SELECT ${batch.map((_, j) => `(SELECT count(*) FROM d${j})`).join(' + ')} AS n`);
    deleted += Number(row.n);
  }
  return deleted;
}
