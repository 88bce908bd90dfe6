import { AccessToken, RefreshRequest, TokenPair, TokenRequest, blacklistRefresh, issueTokens, refreshAccess } from '../../shared/auth/auth.service.ts';
import type { TokenSettings } from '../../shared/auth/tokens.ts';
import type { Logger } from '../../shared/common/logger.ts';
import { SiteRef } from '../../shared/sites/site.schemas.ts';
import { exchangeSiteToken } from '../../shared/sites/site-token.ts';
import { blacklistTenantRefresh, issueTenantTokens, refreshTenantAccess } from '../../shared/tenancy/tenant-auth.ts';
import { Type } from '@sinclair/typebox';
import { endSession, listSessions, openSession, revokeSession, SessionInfo, SessionListItem, sessionInfo } from '../../shared/auth/sessions.ts';
import { notFound, permissionDenied } from '../../shared/errors.ts';
import { clearSessionCookie, foreignOrigin, setSessionCookie } from '../http/auth.ts';
import { MessageBody, sendMessage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

// Served on the platform host and on every site ('both'): on a site (host or /sites/{schema}/…)
// the site's own users sign in, and tokens are bound to that site.
export function authRoutes(tokens: TokenSettings, log: Logger): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/auth/jwt/token/',
      operationId: 'auth_token_create',
      summary: 'Issue an access and a refresh token',
      description:
        'Access tokens live 15 minutes. `username` also accepts the e-mail address. On a site host, the site\'s users sign in (users linked to a platform account with that account\'s password) and the tokens are valid on that site only.',
      tags: ['auth'],
      auth: 'public',
      scope: 'both',
      rateLimit: 'auth',
      body: TokenRequest,
      responses: { 200: TokenPair },
      async handler(ctx, { body }) {
        const tenant = ctx.state.tenant;
        ctx.body = tenant ? await issueTenantTokens(ctx.state.em, tokens, tenant, body) : await issueTokens(ctx.state.em, tokens, body);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/jwt/token/refresh/',
      operationId: 'auth_token_refresh',
      summary: 'Exchange a refresh token for a new access token',
      tags: ['auth'],
      auth: 'public',
      scope: 'both',
      rateLimit: 'auth',
      body: RefreshRequest,
      responses: { 200: AccessToken },
      async handler(ctx, { body }) {
        const tenant = ctx.state.tenant;
        ctx.body = tenant ? await refreshTenantAccess(ctx.state.em, tokens, tenant, body) : await refreshAccess(ctx.state.em, tokens, body);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/jwt/token/blacklist/',
      operationId: 'auth_token_blacklist',
      summary: 'Blacklist a refresh token (logout)',
      tags: ['auth'],
      auth: 'public',
      scope: 'both',
      body: RefreshRequest,
      responses: { 200: MessageBody },
      async handler(ctx, { body }) {
        const tenant = ctx.state.tenant;
        if (tenant) await blacklistTenantRefresh(ctx.state.em, tokens, tenant, body);
        else await blacklistRefresh(ctx.state.em, tokens, body);
        sendMessage(ctx, 'Token blacklisted.');
      },
    }),
    ...sessionRoutes(tokens),
    defineRoute({
      method: 'post',
      path: '/api/cloud/sites/:site/token/',
      operationId: 'sites_token_exchange',
      summary: "Exchange the platform token for the caller's token on a site they administer",
      description:
        "For organization owners and admins (and holders of `admin_site`): the access and refresh tokens of their linked user on the site (slug, UUID or schema name), valid on that site only. Re-checked now: the platform account, `admin_site`, the site being active, and the linked site user's state and standing. Each exchange is logged (event `site_token_exchange`). Site-only users sign in on the site itself.",
      tags: ['auth'],
      auth: 'user',
      params: SiteRef,
      responses: { 200: TokenPair },
      async handler(ctx, { params }) {
        const { schema, site_user, ...pair } = await exchangeSiteToken(ctx.state.service(), tokens, params.site);
        const actor = ctx.state.actor!;
        log.info({ event: 'site_token_exchange', requestId: ctx.state.requestId, user: actor.kind === 'user' ? actor.uuid : actor.name, site: schema, site_user }, 'site token issued');
        ctx.body = pair;
      },
    }),
  ];
}

const SESSION_DOC =
  'Session authentication for the browsable API (spec §5.6; the sign-in form of `/api/docs/` uses it). The session lives in an HttpOnly, SameSite=Strict cookie (`sessionid` on the platform, `sessionid_<schema>` on a site) and is kept server-side: it ends at sign-out, at revocation, when it expires (SESSION_TTL_SECONDS) and when the user\'s password changes or the user is deactivated. Requests it authenticates with POST, PUT, PATCH or DELETE must send its `csrf_token` as the `X-CSRF-Token` header. A bearer token, when sent, takes precedence.';

/** Browser sessions (shared/auth/sessions.ts): sign in, who am I, sign out, list and revoke. */
function sessionRoutes(tokens: TokenSettings): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/auth/session/',
      operationId: 'auth_session_create',
      summary: 'Sign in: open a browser session (cookie)',
      description: `${SESSION_DOC} Takes the credentials of \`POST /api/auth/jwt/token/\` (on a site, the site's users); refused with 403 when the request's Origin names another host.`,
      tags: ['auth'],
      auth: 'public',
      scope: 'both',
      rateLimit: 'auth',
      body: TokenRequest,
      responses: { 200: SessionInfo },
      async handler(ctx, { body }) {
        // Login CSRF: another site's page must not sign the browser in (to an account of its own).
        const problem = foreignOrigin(ctx);
        if (problem) throw permissionDenied(`CSRF Failed: ${problem}`);
        const opened = await openSession(ctx.state.em, tokens, ctx.state.tenant, body, { ip: ctx.ip, userAgent: ctx.get('User-Agent') });
        setSessionCookie(ctx, opened);
        ctx.body = opened.info;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/auth/session/',
      operationId: 'auth_session_retrieve',
      summary: 'The current browser session, with its CSRF token',
      description: `${SESSION_DOC} 401 without a session, 404 when the request came with a bearer token instead.`,
      tags: ['auth'],
      auth: 'user',
      scope: 'both',
      responses: { 200: SessionInfo },
      handler(ctx) {
        const { session, actor } = ctx.state;
        if (!session || actor?.kind !== 'user') throw notFound({ message: 'This request did not come with a session.' });
        ctx.body = sessionInfo(tokens, session, actor);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/auth/session/',
      operationId: 'auth_session_destroy',
      summary: 'Sign out: end the browser session',
      description: `${SESSION_DOC} Ends the session the request's cookie names and clears the cookie.`,
      tags: ['auth'],
      auth: 'user',
      scope: 'both',
      responses: { 200: MessageBody },
      async handler(ctx) {
        const { session } = ctx.state;
        if (!session) throw notFound({ message: 'This request did not come with a session.' });
        await endSession(ctx.state.em, session.id);
        clearSessionCookie(ctx);
        sendMessage(ctx, 'Signed out.');
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/auth/sessions/',
      operationId: 'auth_sessions_list',
      summary: "The caller's open browser sessions on this host",
      description: 'Platform sessions on the platform host, the site\'s own sessions on a site. `current` marks the session of this request.',
      tags: ['auth'],
      auth: 'user',
      scope: 'both',
      responses: { 200: Type.Array(SessionListItem) },
      async handler(ctx) {
        const { actor, session, tenant } = ctx.state;
        if (actor?.kind !== 'user') throw notFound({ message: 'Only users have sessions.' });
        ctx.body = await listSessions(ctx.state.reads(), actor.uuid, tenant, session?.id);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/auth/sessions/:id/',
      operationId: 'auth_sessions_destroy',
      summary: 'Revoke one of the caller\'s browser sessions',
      description: 'The session ends at once, in every server process. 404 for a session that is not the caller\'s on this host.',
      tags: ['auth'],
      auth: 'user',
      scope: 'both',
      params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        const { actor, session, tenant } = ctx.state;
        if (actor?.kind !== 'user') throw notFound('Session');
        await revokeSession(ctx.state.em, actor.uuid, tenant, params.id);
        if (session?.id === params.id) clearSessionCookie(ctx);
        sendMessage(ctx, 'Session revoked.');
      },
    }),
  ];
}
