// Social apps and headless social login of a site (spec Part 1 §4; docs/social-login.md). Served
// on site hosts (and /sites/{schema}/…) only: social apps belong to a site, and the identities
// they sign in become that site's users.
import { Type } from '@sinclair/typebox';
import type { TokenSettings } from '../../shared/auth/tokens.ts';
import type { OutboundGuard } from '../../shared/net/outbound.ts';
import type { SecretKeyring } from '../../shared/secrets/crypto.ts';
import { socialRedirect, socialToken, type SocialLoginOptions } from '../../shared/social/login.ts';
import * as apps from '../../shared/social/social-app.service.ts';
import { assertSchemaName } from '../../shared/tenancy/schema.ts';
import type { UserEvents } from '../../shared/functions/events.service.ts';
import type { AppContext } from '../http/types.ts';
import { flagged } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

const Open = Type.Object({}, { additionalProperties: true });
const IdParam = Type.Object({ id: Type.String({ description: 'The social app (its id)' }) });
const ProviderParam = Type.Object({ provider: Type.String({ minLength: 1, maxLength: 64 }) });
const ListQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ description: 'In name, provider, client_id and provider_id' })),
    provider: Type.Optional(Type.String()),
    ordering: Type.Optional(Type.String({ description: 'name (default), provider, id; `-` for descending' })),
    page: Type.Optional(Type.String()),
    page_size: Type.Optional(Type.String({ description: 'Default 10, at most 100' })),
  },
  { additionalProperties: false },
);
const SocialApp = Type.Object(
  {
    id: Type.Integer(),
    provider: Type.String(),
    provider_id: Type.String(),
    name: Type.String(),
    client_id: Type.String(),
    secret: Type.String({ description: 'Echoed on create; `***HIDDEN***` everywhere else' }),
    key: Type.String(),
    settings: Open,
    provider_display: Type.String(),
    is_configured: Type.Boolean(),
  },
);
/** The site of a public route (scope 'tenant': host routing has set it). */
const siteOf = (ctx: AppContext): string => assertSchemaName(ctx.state.tenant ?? '');
const WHO_MANAGES = 'The site\'s superusers (the organization\'s owners and admins are superusers of its sites).';

export function socialRoutes(keyring: SecretKeyring, tokens: TokenSettings, allowHttp: boolean, events: UserEvents, outbound: OutboundGuard): RouteDef[] {
  const login: SocialLoginOptions = { keyring, tokens, allowHttp, events, outbound };
  const base = { scope: 'tenant' as const, tags: ['social login'] };
  return [
    defineRoute({
      ...base,
      auth: 'public',
      method: 'get',
      path: '/api/auth/social-apps/',
      operationId: 'social_apps_list',
      summary: "List the site's social login providers (public)",
      description: 'For a login page: no token needed. `icon` and `auto_redirect` come out of `settings`; no credentials are listed.',
      query: ListQuery,
      responses: {
        200: Type.Object({
          status: Type.Literal('success'),
          message: Type.String(),
          data: Type.Array(Open),
          total: Type.Integer(),
          pagination: Type.Object({ page: Type.Integer(), page_size: Type.Integer(), total_pages: Type.Integer() }),
        }),
      },
      async handler(ctx, { query }) {
        const page = await apps.listSocialApps(ctx.state.reads(), siteOf(ctx), query as apps.SocialAppQuery);
        ctx.body = {
          status: 'success',
          message: 'Social apps retrieved.',
          data: page.items,
          total: page.total,
          pagination: { page: page.page, page_size: page.page_size, total_pages: page.total_pages },
        };
      },
    }),
    defineRoute({
      ...base,
      auth: 'user',
      method: 'post',
      path: '/api/auth/social-apps/',
      operationId: 'social_apps_create',
      summary: 'Create a social app',
      description: `${WHO_MANAGES} The secret is stored encrypted and echoed in this response only.`,
      body: Open,
      responses: { 201: flagged(SocialApp) },
      async handler(ctx, { body }) {
        const data = await apps.createSocialApp(ctx.state.service(), keyring, outbound, body);
        ctx.status = 201;
        ctx.body = { success: true, message: 'Social app created.', data };
      },
    }),
    defineRoute({
      ...base,
      auth: 'user',
      method: 'get',
      path: '/api/auth/social-apps/:id/',
      operationId: 'social_apps_retrieve',
      summary: 'Get a social app (secret masked)',
      description: 'Any signed-in user of the site.',
      params: IdParam,
      responses: { 200: SocialApp },
      async handler(ctx, { params }) {
        ctx.body = await apps.getSocialApp(ctx.state.service(), params.id!);
      },
    }),
    ...(['patch', 'put'] as const).map((method) =>
      defineRoute({
        ...base,
        auth: 'user',
        method,
        path: '/api/auth/social-apps/:id/',
        operationId: `social_apps_${method === 'patch' ? 'partial_update' : 'update'}`,
        summary: method === 'patch' ? 'Update a social app (omitted fields keep their values)' : 'Update a social app (a body from GET may be sent back whole)',
        description: `${WHO_MANAGES} \`secret\` sent back as \`***HIDDEN***\` keeps the stored one; read-only fields sent back are ignored.`,
        params: IdParam,
        body: Open,
        responses: { 200: flagged(SocialApp) },
        async handler(ctx, { params, body }) {
          ctx.body = { success: true, message: 'Social app updated.', data: await apps.updateSocialApp(ctx.state.service(), keyring, outbound, params.id!, body) };
        },
      }),
    ),
    defineRoute({
      ...base,
      auth: 'user',
      method: 'delete',
      path: '/api/auth/social-apps/:id/',
      operationId: 'social_apps_destroy',
      summary: 'Delete a social app',
      description: `${WHO_MANAGES} Refused (400, with \`active_users\` and a \`suggestion\`) while active users are connected through it.`,
      params: IdParam,
      responses: { 200: Type.Object({ success: Type.Literal(true), message: Type.String() }) },
      async handler(ctx, { params }) {
        await apps.deleteSocialApp(ctx.state.service(), params.id!);
        ctx.body = { success: true, message: 'Social app deleted.' };
      },
    }),
    defineRoute({
      ...base,
      auth: 'user',
      method: 'get',
      path: '/api/auth/:provider/redirect/',
      operationId: 'social_login_redirect',
      summary: "The provider's authorization URL (state, nonce, PKCE S256)",
      description:
        "`{provider}` is the social app's `provider_id`, or its provider when it has none. Query `redirect_uri`: where the provider sends the user back with `code` and `state` (https; http for localhost). State, nonce and the PKCE verifier stay on the server for 10 minutes, for one token call. The bearer token (§4) identifies the calling client; it does not decide who signs in.",
      params: ProviderParam,
      query: Type.Object({ redirect_uri: Type.Optional(Type.String()) }, { additionalProperties: false }),
      responses: { 200: flagged(Type.Object({ authorization_url: Type.String(), state: Type.String(), provider: Type.String(), expires_in: Type.Integer() })) },
      async handler(ctx, { params, query }) {
        const actor = ctx.state.actor!;
        const data = await socialRedirect(ctx.state.em, siteOf(ctx), params.provider!, query as { redirect_uri?: string }, actor.kind === 'user' ? actor.uuid : null, login);
        ctx.body = { success: true, message: 'Authorization URL created.', data };
      },
    }),
    defineRoute({
      ...base,
      auth: 'public',
      rateLimit: 'auth',
      method: 'post',
      path: '/api/auth/:provider/token/',
      operationId: 'social_login_token',
      summary: "Exchange the provider's code for the site's tokens",
      description:
        'Body `{code, state}` (`state`: what the redirect returned, an addition to §4; `iss` when the provider sent one). The ID token is checked (issuer, audience, nonce, expiry, and its signature against the provider JWKS); the identity signs in as the user connected to it, else the user with the same e-mail when the provider verified the address and the site trusts it, else a new user. An unverified address that matches a user is refused (403).',
      params: ProviderParam,
      body: Open,
      responses: {
        200: Type.Object({
          access: Type.String(),
          refresh: Type.String(),
          user: Type.Object({ uuid: Type.String(), username: Type.String(), email: Type.String() }),
          created: Type.Boolean({ description: 'Whether the sign-in made a new user' }),
        }),
      },
      async handler(ctx, { params, body }) {
        ctx.body = await socialToken(ctx.state.em, siteOf(ctx), params.provider!, body, login);
      },
    }),
  ];
}
