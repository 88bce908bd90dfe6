// The named platforms of social login, each against a local stand-in of its endpoints (the
// machine is offline; `settings.server_url` points the provider at the stand-in):
//   - Google, Microsoft and GitLab are OpenID Connect: a real oidc-provider plays each;
//   - GitHub (OAuth 2 without ID token): a stand-in of its authorize, access_token, /user and
//     /user/emails endpoints that checks PKCE and the client's credentials;
//   - Apple: a stand-in OIDC server that checks the client secret is an ES256 JWT signed with the
//     app's private key (team ID, key ID, client ID, audience) and answers an RS256 ID token
//     whose `email_verified` is the string "true", as Apple's is.
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import jwt from 'jsonwebtoken';
import { githubEndpoints, providerInfo, serverUrl } from '../../shared/social/providers.ts';
import { followToRedirect, startOidcProvider, type TestOidcProvider } from '../../shared/testing/oidc.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { seedSiteUser, siteToken } from './site-users.ts';

const REDIRECT = 'http://localhost:5173/callback';
let s: TestServer;
let site: TestSite;
let admin: string;
let op: TestOidcProvider;
let standin: { url: string; close: () => Promise<void>; seen: string[] };
const apple = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const APPLE_KEY = apple.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

const on = (method: string, path: string, body?: unknown, token: string | undefined = admin) => s.api(method, path, { host: site.domain, token, body });

/** The stand-ins of GitHub (/github/…) and Apple (/apple/…), on one loopback server. */
async function startStandins() {
  const codes = new Map<string, { challenge: string; redirect: string; nonce?: string; client: string }>();
  const seen: string[] = [];
  const signing = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(signing.publicKey)), kid: 'apple-test', alg: 'RS256', use: 'sig' };
  let base = '';
  const form = async (req: http.IncomingMessage) => {
    let text = '';
    for await (const chunk of req) text += chunk;
    return new URLSearchParams(text);
  };
  const json = (res: http.ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const pkceOk = (verifier: string | null, challenge: string) => !!verifier && createHash('sha256').update(verifier).digest('base64url') === challenge;
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url!, base);
    seen.push(`${req.method} ${url.pathname}`);
    const authorize = () => {
      const code = randomBytes(16).toString('hex');
      if (url.searchParams.get('code_challenge_method') !== 'S256') return json(res, 400, { error: 'invalid_request' });
      codes.set(code, { challenge: url.searchParams.get('code_challenge')!, redirect: url.searchParams.get('redirect_uri')!, nonce: url.searchParams.get('nonce') ?? undefined, client: url.searchParams.get('client_id')! });
      const back = new URL(url.searchParams.get('redirect_uri')!);
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state')!);
      res.writeHead(302, { location: back.href }).end();
    };
    const redeem = (p: URLSearchParams) => {
      const grant = codes.get(p.get('code') ?? '');
      codes.delete(p.get('code') ?? '');
      return grant && grant.redirect === p.get('redirect_uri') && grant.client === p.get('client_id') && pkceOk(p.get('code_verifier'), grant.challenge) ? grant : undefined;
    };
    switch (`${req.method} ${url.pathname}`) {
      case 'GET /github/login/oauth/authorize':
      case 'GET /apple/auth/authorize':
        return authorize();
      case 'POST /github/login/oauth/access_token': {
        const p = await form(req);
        if (p.get('client_secret') !== 'gh-secret' || !redeem(p)) return json(res, 200, { error: 'bad_verification_code' });
        return json(res, 200, { access_token: 'gho_token', token_type: 'bearer', scope: 'read:user,user:email' });
      }
      case 'GET /github/api/v3/user':
        if (req.headers.authorization !== 'Bearer gho_token') return json(res, 401, { message: 'Bad credentials' });
        return json(res, 200, { id: 4242, login: 'octocat', name: 'Octo Cat', avatar_url: 'https://example.com/o.png' });
      case 'GET /github/api/v3/user/emails':
        if (req.headers.authorization !== 'Bearer gho_token') return json(res, 401, { message: 'Bad credentials' });
        return json(res, 200, [{ email: 'old@example.com', primary: false, verified: true }, { email: 'octo@example.com', primary: true, verified: true }]);
      case 'GET /apple/.well-known/openid-configuration':
        return json(res, 200, {
          issuer: `${base}/apple`,
          authorization_endpoint: `${base}/apple/auth/authorize`,
          token_endpoint: `${base}/apple/auth/token`,
          jwks_uri: `${base}/apple/auth/keys`,
          response_types_supported: ['code'],
          subject_types_supported: ['pairwise'],
          id_token_signing_alg_values_supported: ['RS256'],
          token_endpoint_auth_methods_supported: ['client_secret_post'],
        });
      case 'GET /apple/auth/keys':
        return json(res, 200, { keys: [jwk] });
      case 'POST /apple/auth/token': {
        const p = await form(req);
        try {
          // Apple's client secret: ES256, iss = team ID, sub = client ID, aud = Apple's issuer, kid = the key ID.
          const decoded = jwt.verify(p.get('client_secret') ?? '', apple.publicKey, { algorithms: ['ES256'], issuer: 'TEAM123', audience: `${base}/apple`, subject: 'com.example.web', complete: true });
          if (decoded.header.kid !== 'KEY123') throw new Error('kid');
        } catch {
          return json(res, 400, { error: 'invalid_client' });
        }
        const grant = redeem(p);
        if (!grant) return json(res, 400, { error: 'invalid_grant' });
        const idToken = await new SignJWT({ nonce: grant.nonce, email: 'apple-user@privaterelay.example.com', email_verified: 'true' })
          .setProtectedHeader({ alg: 'RS256', kid: 'apple-test' })
          .setIssuer(`${base}/apple`)
          .setAudience('com.example.web')
          .setSubject('000123.apple-subject')
          .setIssuedAt()
          .setExpirationTime('5m')
          .sign(signing.privateKey);
        return json(res, 200, { access_token: 'apple-access', token_type: 'Bearer', expires_in: 3600, id_token: idToken });
      }
      default:
        return json(res, 404, { error: 'not_found' });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    seen,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The redirect, the provider (stand-in or OP), the token call: the answer of the token call. */
async function signIn(key: string) {
  const start = await on('GET', `/api/auth/${key}/redirect/?redirect_uri=${encodeURIComponent(REDIRECT)}`);
  if (start.status !== 200) throw new Error(start.text);
  const callback = await followToRedirect(start.body.data.authorization_url, REDIRECT);
  return on('POST', `/api/auth/${key}/token/`, { code: callback.get('code'), state: callback.get('state'), iss: callback.get('iss') ?? undefined }, undefined);
}

test.before(async () => {
  op = await startOidcProvider({ clientId: 'platform', clientSecret: 'op-secret', redirectUri: REDIRECT });
  standin = await startStandins();
  s = await startTestServer({ SOCIAL_LOGIN_ALLOW_HTTP: 'true', OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32' });
  site = await createTestSite(s.handle.db.orm.em.fork());
  await seedSiteUser(s, site, 'boss', { superuser: true });
  admin = await siteToken(s, site, 'boss');
});
test.after.always(async () => {
  await s?.close();
  await op?.close();
  await standin?.close();
});

for (const [provider, settings] of [
  ['google', {}],
  ['microsoft', { tenant: '00000000-0000-0000-0000-000000000001' }],
  ['gitlab', {}],
] as const) {
  test.serial(`${provider}: OpenID Connect through the provider's discovery (an OP at server_url)`, async (t) => {
    const made = await on('POST', '/api/auth/social-apps/', { provider, name: provider, client_id: 'platform', secret: 'op-secret', settings: { ...settings, server_url: op.issuer } });
    t.is(made.status, 201, made.text);
    op.accounts.set(`${provider}-user`, { email: `${provider}@example.com`, email_verified: true, preferred_username: `${provider}-user` });
    op.signInAs(`${provider}-user`);
    const res = await signIn(provider);
    t.is(res.status, 200, res.text);
    t.like(res.body, { created: true, user: { email: `${provider}@example.com` } });
  });
}

test.serial('microsoft needs its tenant; without server_url the providers are the real platforms', async (t) => {
  t.is(serverUrl(providerInfo('google')!, {}), 'https://accounts.google.com');
  t.is(serverUrl(providerInfo('microsoft')!, { tenant: 'abc' }), 'https://login.microsoftonline.com/abc/v2.0');
  t.is(serverUrl(providerInfo('gitlab')!, {}), 'https://gitlab.com');
  t.is(serverUrl(providerInfo('apple')!, { team_id: 'T' }), 'https://appleid.apple.com');
  t.deepEqual(githubEndpoints('https://github.com'), { authorize: 'https://github.com/login/oauth/authorize', token: 'https://github.com/login/oauth/access_token', api: 'https://api.github.com' });
  t.is(githubEndpoints('https://ghe.example.com/').api, 'https://ghe.example.com/api/v3');
  const res = await on('POST', '/api/auth/social-apps/', { provider: 'microsoft', name: 'MS', client_id: 'x', secret: 'x' });
  t.is(res.status, 400);
  t.regex(res.body.errors.settings[0], /"tenant" is required/);
});

test.serial('github: OAuth 2 with PKCE, then the user and its verified primary e-mail from the API', async (t) => {
  const made = await on('POST', '/api/auth/social-apps/', { provider: 'github', name: 'GitHub', client_id: 'gh-client', secret: 'gh-secret', settings: { server_url: `${standin.url}/github` } });
  t.is(made.status, 201, made.text);
  const res = await signIn('github');
  t.is(res.status, 200, res.text);
  t.like(res.body, { created: true, user: { username: 'octocat', email: 'octo@example.com' } });
  t.true(standin.seen.includes('GET /github/api/v3/user/emails'));
  const again = await signIn('github');
  t.like(again.body, { created: false, user: { uuid: res.body.user.uuid } });
  // A wrong client secret: the stand-in refuses the code, the platform says so (400) without the secret.
  await on('PATCH', `/api/auth/social-apps/${made.body.data.id}/`, { secret: 'wrong-secret' });
  const refused = await signIn('github');
  t.is(refused.status, 400);
  t.regex(refused.body.message, /provider refused/);
  t.false(refused.text.includes('wrong-secret'));
});

test.serial('apple: the client secret is an ES256 JWT signed with the app key; email_verified "true" counts as verified', async (t) => {
  const made = await on('POST', '/api/auth/social-apps/', {
    provider: 'apple', name: 'Apple', client_id: 'com.example.web', secret: APPLE_KEY, key: 'KEY123', settings: { team_id: 'TEAM123', server_url: `${standin.url}/apple` },
  });
  t.is(made.status, 201, made.text);
  const res = await signIn('apple');
  t.is(res.status, 200, res.text);
  t.like(res.body, { created: true, user: { email: 'apple-user@privaterelay.example.com' } });
  const [row] = await s.handle.db.orm.em.fork().execute(`SELECT email_verified FROM "${site.schema}".users WHERE uuid = ?`, [res.body.user.uuid]);
  t.true(row.email_verified);
  // Another key ID: the stand-in refuses the client (invalid_client).
  await on('PATCH', `/api/auth/social-apps/${made.body.data.id}/`, { key: 'OTHER' });
  const refused = await signIn('apple');
  t.is(refused.status, 400);
  t.regex(refused.body.message, /invalid_client/);
});
