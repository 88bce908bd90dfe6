import { AccessToken, RefreshRequest, TokenPair, TokenRequest, blacklistRefresh, issueTokens, refreshAccess } from '../../shared/auth/auth.service.ts';
import type { TokenSettings } from '../../shared/auth/tokens.ts';
import { MessageBody, sendMessage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

export function authRoutes(tokens: TokenSettings): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/api/auth/jwt/token/',
      operationId: 'auth_token_create',
      summary: 'Issue an access and a refresh token',
      description: 'Access tokens live 15 minutes. `username` also accepts the e-mail address.',
      tags: ['auth'],
      auth: 'public',
      rateLimit: 'auth',
      body: TokenRequest,
      responses: { 200: TokenPair },
      async handler(ctx, { body }) {
        ctx.body = await issueTokens(ctx.state.em, tokens, body);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/jwt/token/refresh/',
      operationId: 'auth_token_refresh',
      summary: 'Exchange a refresh token for a new access token',
      tags: ['auth'],
      auth: 'public',
      rateLimit: 'auth',
      body: RefreshRequest,
      responses: { 200: AccessToken },
      async handler(ctx, { body }) {
        ctx.body = await refreshAccess(ctx.state.em, tokens, body);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/auth/jwt/token/blacklist/',
      operationId: 'auth_token_blacklist',
      summary: 'Blacklist a refresh token (logout)',
      tags: ['auth'],
      auth: 'public',
      body: RefreshRequest,
      responses: { 200: MessageBody },
      async handler(ctx, { body }) {
        await blacklistRefresh(ctx.state.em, tokens, body);
        sendMessage(ctx, 'Token blacklisted.');
      },
    }),
  ];
}
