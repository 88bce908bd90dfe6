import { AccessToken, RefreshRequest, TokenPair, TokenRequest, blacklistRefresh, issueTokens, refreshAccess } from '../../shared/auth/auth.service.ts';
import type { TokenSettings } from '../../shared/auth/tokens.ts';
import type { Logger } from '../../shared/common/logger.ts';
import { SiteRef } from '../../shared/sites/site.schemas.ts';
import { exchangeSiteToken } from '../../shared/sites/site-token.ts';
import { blacklistTenantRefresh, issueTenantTokens, refreshTenantAccess } from '../../shared/tenancy/tenant-auth.ts';
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
