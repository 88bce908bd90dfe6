// Authentication, as a step of every route's pipeline (see registry.ts): a bearer token, else
// a browser session's cookie (spec Part 1 §5.6; shared/auth/sessions.ts), else none.
import type { IncomingMessage } from 'node:http';
import type { Actor } from '../../shared/auth/actor.ts';
import { actorNamed, authenticateAccess, type UserAuth } from '../../shared/auth/auth.service.ts';
import { authenticateSession, CSRF_HEADER, csrfMatches, sessionCookieName, type RequestSession } from '../../shared/auth/sessions.ts';
import type { CachedLookup } from '../../shared/common/cached-lookup.ts';
import { tokenExpiry, type TokenSettings } from '../../shared/auth/tokens.ts';
import { DomainError, invalidToken, permissionDenied } from '../../shared/errors.ts';
import { SAFE_METHODS } from './middleware.ts';
import type { RouteDef } from './registry.ts';
import type { AppContext } from './types.ts';

/**
 * The actor of a request the CLI injects in process (direct mode): a property under this
 * symbol on the request object, which only code in this process can set — no header, token or
 * anything else a network request carries. `as`: a user named by the operator (`--as`).
 */
export const DIRECT_ACTOR = Symbol('platform.direct-actor');
export type DirectActor = { actor: Actor } | { as: string };
export type DirectRequest = IncomingMessage & { [DIRECT_ACTOR]?: DirectActor };

export function authentication(settings: TokenSettings, users?: CachedLookup<UserAuth | null>) {
  return async (ctx: AppContext, def: RouteDef) => {
    const direct = (ctx.req as DirectRequest)[DIRECT_ACTOR];
    if (direct) {
      ctx.state.actor = 'actor' in direct ? direct.actor : await actorNamed(ctx.state.em, direct.as, ctx.state.tenant);
      return;
    }
    const header = ctx.get('Authorization');
    if (header) return bearer(ctx, def, settings, header, users);
    const key = ctx.cookies.get(sessionCookieName(ctx.state.tenant));
    if (key) return session(ctx, def, settings, key, users);
  };
}

async function bearer(ctx: AppContext, def: RouteDef, settings: TokenSettings, header: string, users?: CachedLookup<UserAuth | null>) {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  try {
    if (!match) throw invalidToken('Authorization header must be "Bearer <token>".');
    const auth = await authenticateAccess(ctx.state.reads(), settings, match[1], ctx.state.tenant, users);
    ctx.state.actor = auth.actor;
    ctx.state.ability = auth.ability;
    ctx.state.recheck = async () => void (await authenticateAccess(ctx.state.reads(), settings, match[1]!, ctx.state.tenant, users));
    ctx.state.expires = tokenExpiry(settings, match[1]);
  } catch (err) {
    // A stale or foreign token on a public route (logging in again, say) is ignored.
    if (def.auth === 'public' && err instanceof DomainError && err.status === 401) return;
    throw err;
  }
}

/**
 * A session cookie: its user, if the session is open and the user still usable; on an unsafe
 * method, only with the session's CSRF token and no foreign Origin. On a public route a cookie
 * that fails is ignored (the request is anonymous); elsewhere it is a 401 (ended) or 403 (CSRF).
 */
async function session(ctx: AppContext, def: RouteDef, settings: TokenSettings, key: string, users?: CachedLookup<UserAuth | null>) {
  const found = await authenticateSession(ctx.state.reads(), key, ctx.state.tenant, users);
  if (!found) {
    clearSessionCookie(ctx); // the browser forgets a session that ended
    if (def.auth === 'public') return;
    throw invalidToken('Session has expired or ended: sign in again.');
  }
  if (!SAFE_METHODS.has(ctx.method)) {
    const problem = foreignOrigin(ctx) ?? csrfProblem(ctx, settings, key);
    if (problem) {
      if (def.auth === 'public') return;
      throw permissionDenied(`CSRF Failed: ${problem}`);
    }
  }
  ctx.state.actor = found.auth.actor;
  ctx.state.ability = found.auth.ability;
  ctx.state.session = found.session;
  ctx.state.recheck = async () => {
    if (!(await authenticateSession(ctx.state.reads(), key, ctx.state.tenant, users))) throw invalidToken('Session has expired or ended: sign in again.');
  };
  ctx.state.expires = found.session.expires_at.getTime();
}

function csrfProblem(ctx: AppContext, settings: TokenSettings, key: string): string | undefined {
  const sent = ctx.get(CSRF_HEADER);
  if (!sent) return `${CSRF_HEADER} header missing.`;
  if (!csrfMatches(settings, key, sent)) return `${CSRF_HEADER} header incorrect.`;
  return undefined;
}

/** What is wrong with the request's Origin header, when it names another host than the request's (browsers send it on every unsafe request). */
export function foreignOrigin(ctx: AppContext): string | undefined {
  const origin = ctx.get('Origin');
  if (!origin) return undefined;
  let host: string | undefined;
  try {
    host = new URL(origin).host;
  } catch {
    host = undefined; // "null" (an opaque origin) or garbage
  }
  return host === ctx.host ? undefined : `Origin ${JSON.stringify(origin.slice(0, 200))} does not match the host.`;
}

const cookieOptions = (ctx: AppContext) => ({ httpOnly: true, sameSite: 'strict' as const, secure: ctx.secure, path: '/', overwrite: true });

/** The session's cookie for this host (platform or site): HttpOnly, SameSite=Strict, Secure over https, until the session expires. */
export function setSessionCookie(ctx: AppContext, session: Pick<RequestSession, 'key' | 'expires_at'>): void {
  ctx.cookies.set(sessionCookieName(ctx.state.tenant), session.key, { ...cookieOptions(ctx), expires: session.expires_at });
}

export function clearSessionCookie(ctx: AppContext): void {
  ctx.cookies.set(sessionCookieName(ctx.state.tenant), null, cookieOptions(ctx));
}
