// Browser sessions of the browsable API (spec Part 1 §5.6): sign in once at /api/docs/, and the
// browser's cookie authenticates every request beside bearer tokens.
//
// - The cookie holds 32 random bytes; PostgreSQL keeps only their SHA-256 (public.sessions), so a
//   copy of the table signs nobody in. Ending a session (sign-out, revocation) deletes its row:
//   the next request is refused, in every process at once.
// - A session belongs to a platform user (site_schema null) or to one site's user; it is valid
//   there only, as a token is. Its cookie's name names the site (`sessionid`, `sessionid_<schema>`),
//   so a browser can hold the platform's and several sites' sessions on one host.
// - The user's token generation is recorded at sign-in and checked on every request (through the
//   same cached UserAuth as tokens): a password change, deactivation, deletion, demotion of a
//   linked administrator or "revoke all tokens" ends the session too.
// - CSRF: the cookie is HttpOnly and SameSite=Strict, and unsafe methods authenticated by it must
//   carry `X-CSRF-Token`, an HMAC of the session key under the server's secret (nothing stored;
//   given out by sign-in and by GET /api/auth/session/, which another origin cannot read: CORS
//   never allows credentials). A request whose Origin names another host is refused.
import { pruneChangeLogs, type Retention } from '../realtime/changelog.ts';
import { forEachCluster, PRIMARY_CLUSTER } from '../db/clusters.ts';
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Type, type Static } from '@sinclair/typebox';
import type { CachedLookup } from '../common/cached-lookup.ts';
import { pruneIdempotencyKeys } from '../db/idempotency.ts';
import { countOf, firstRow, iso, preparedRows, rows, type Timestamp } from '../db/sql.ts';
import { DomainError, notFound } from '../errors.ts';
import { platformSignIn, currentUserAuth, pruneBlacklist, type UserAuth } from './auth.service.ts';
import type { TokenSettings } from './tokens.ts';
import { siteSignIn } from '../tenancy/tenant-auth.ts';
import { selectUserRow } from '../users/user.queries.ts';

export const SessionInfo = Type.Object({
  id: Type.String({ format: 'uuid' }),
  user_uuid: Type.String({ format: 'uuid' }),
  username: Type.String(),
  expires_at: Type.String({ format: 'date-time' }),
  csrf_token: Type.String({ description: 'Send it as the `X-CSRF-Token` header on POST, PUT, PATCH and DELETE requests that the session cookie authenticates.' }),
});
export type SessionInfo = Static<typeof SessionInfo>;

export const SessionListItem = Type.Object({
  id: Type.String({ format: 'uuid' }),
  created_at: Type.String({ format: 'date-time' }),
  expires_at: Type.String({ format: 'date-time' }),
  user_agent: Type.String(),
  ip: Type.String(),
  current: Type.Boolean({ description: 'The session this request came with.' }),
});

export const CSRF_HEADER = 'X-CSRF-Token';
const KEY_FORM = /^[A-Za-z0-9_-]{43}$/;

/** The session cookie's name on the platform (tenant null) or on a site. */
export const sessionCookieName = (tenant: string | null): string => (tenant ? `sessionid_${tenant}` : 'sessionid');

const keyHash = (key: string): Buffer => createHash('sha256').update(key).digest();

/** The CSRF token of a session: derived from its key, so nothing is stored and it ends with the session. */
export const csrfToken = (settings: TokenSettings, key: string): string => createHmac('sha256', settings.secretKey).update(`csrf:${key}`).digest('base64url');

/** Whether `sent` (a request's X-CSRF-Token) is the session's token; constant-time. */
export function csrfMatches(settings: TokenSettings, key: string, sent: string): boolean {
  const expected = Buffer.from(csrfToken(settings, key));
  const given = Buffer.from(sent);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The session behind a request's cookie, once authenticated. */
export interface RequestSession {
  id: string;
  key: string;
  expires_at: Date;
}

export interface NewSession extends RequestSession {
  info: SessionInfo;
}

interface Client {
  ip: string;
  userAgent: string;
}

/**
 * POST /api/auth/session/: the credentials of the token route (the platform's users, or on a site
 * that site's users) open a session. Returns its key (for the cookie only) and what the page shows.
 */
export async function openSession(em: EntityManager, settings: TokenSettings, tenant: string | null, input: unknown, client: Client): Promise<NewSession> {
  const user = tenant ? await siteSignIn(em, tenant, input) : await platformSignIn(em, input);
  const key = randomBytes(32).toString('base64url');
  const expires = new Date(Date.now() + settings.sessionTtlSeconds * 1000);
  const row = await firstRow<{ id: string }>(
    em,
    'INSERT INTO public.sessions (key_hash, site_schema, user_uuid, generation, user_agent, ip, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id',
    [keyHash(key), tenant, user.uuid, user.token_generation, client.userAgent.slice(0, 512), client.ip.slice(0, 64), expires],
  );
  const session = { id: row!.id, key, expires_at: expires };
  return { ...session, info: sessionInfo(settings, session, user) };
}

export function sessionInfo(settings: TokenSettings, session: RequestSession, user: { uuid: string; username: string }): SessionInfo {
  return { id: session.id, user_uuid: user.uuid, username: user.username, expires_at: session.expires_at.toISOString(), csrf_token: csrfToken(settings, session.key) };
}

/**
 * The user of a session cookie's value on this host (platform or site): its session if open and
 * unexpired, and the user's auth state if still usable and of the same token generation; null
 * otherwise (the caller decides whether that is a 401). One indexed read, plus the user's auth
 * when it is not cached.
 */
export async function authenticateSession(
  em: EntityManager,
  key: string,
  tenant: string | null,
  cache?: CachedLookup<UserAuth | null>,
): Promise<{ auth: UserAuth; session: RequestSession } | null> {
  if (!KEY_FORM.test(key)) return null;
  const [row] = await preparedRows<{ id: string; user_uuid: string; generation: number; expires_at: Timestamp }>(
    em,
    'SELECT id, user_uuid, generation, expires_at FROM public.sessions WHERE key_hash = ? AND site_schema IS NOT DISTINCT FROM ? AND expires_at > now()',
    [keyHash(key), tenant],
  );
  if (!row) return null;
  try {
    const auth = await currentUserAuth(em, row.user_uuid, row.generation, tenant, cache);
    return { auth, session: { id: row.id, key, expires_at: new Date(iso(row.expires_at)) } };
  } catch (err) {
    if (err instanceof DomainError && err.status === 401) return null; // the user is no longer usable, or its tokens were revoked
    throw err;
  }
}

/** Sign-out: the session's row goes (its cookie is refused everywhere from now on). */
export async function endSession(em: EntityManager, id: string): Promise<void> {
  await rows(em, 'DELETE FROM public.sessions WHERE id = ?', [id]);
}

/** GET /api/auth/sessions/: the caller's open sessions on this host (platform or site), newest first (those of an older token generation are dead). */
export async function listSessions(em: EntityManager, userUuid: string, tenant: string | null, current?: string) {
  const user = await selectUserRow(em, userUuid, tenant);
  if (!user) return [];
  const open = await rows<{ id: string; created_at: Timestamp; expires_at: Timestamp; user_agent: string; ip: string }>(
    em,
    `SELECT id, created_at, expires_at, user_agent, ip FROM public.sessions
      WHERE user_uuid = ? AND site_schema IS NOT DISTINCT FROM ? AND generation = ? AND expires_at > now() ORDER BY created_at DESC, id`,
    [userUuid, tenant, user.token_generation],
  );
  return open.map((r) => ({ ...r, created_at: iso(r.created_at), expires_at: iso(r.expires_at), current: r.id === current }));
}

/** DELETE /api/auth/sessions/{id}/: ends one of the caller's own sessions on this host; 404 for anyone else's. */
export async function revokeSession(em: EntityManager, userUuid: string, tenant: string | null, id: string): Promise<void> {
  const gone = await firstRow(em, 'DELETE FROM public.sessions WHERE id = ? AND user_uuid = ? AND site_schema IS NOT DISTINCT FROM ? RETURNING id', [id, userUuid, tenant]);
  if (!gone) throw notFound('Session');
}

/** Expired sessions go. Returns how many. */
export async function pruneSessions(em: EntityManager): Promise<number> {
  return countOf(em, 'WITH d AS (DELETE FROM public.sessions WHERE expires_at < now() RETURNING 1) SELECT count(*) AS n FROM d');
}

/**
 * The expired rows of the token blacklists (platform and every site), of the browser sessions and
 * of the idempotency keys go, and the record changes past their retention (realtime/changelog.ts):
 * servers on their schedule, `platform prune` when asked.
 */
export async function pruneExpired(em: EntityManager, retention: Retention): Promise<{ deleted: number; sessions: number; idempotencyKeys: number; changes: number }> {
  // On every cluster: each holds its sites' blacklists, sessions, idempotency keys and change logs (db/clusters.ts).
  const each = await forEachCluster(em, async (c, name) => ({
    deleted: await pruneBlacklist(c, name === PRIMARY_CLUSTER),
    sessions: await pruneSessions(c),
    idempotencyKeys: await pruneIdempotencyKeys(c),
    changes: await pruneChangeLogs(c, retention),
  }));
  return each.reduce((sum, r) => ({ deleted: sum.deleted + r.deleted, sessions: sum.sessions + r.sessions, idempotencyKeys: sum.idempotencyKeys + r.idempotencyKeys, changes: sum.changes + r.changes }));
}
