import test from 'ava';
import jwt from 'jsonwebtoken';
import { ADMIN, TEST_SECRET, startTestServer, type TestServer } from './helpers.ts';

let s: TestServer;
test.before(async () => {
  s = await startTestServer();
});
test.after.always(async () => {
  await s?.close();
});

const NOT_PROVIDED = 'Authentication credentials were not provided.';

test('token issue returns an access and a refresh token; access lives 15 minutes', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: ADMIN.password } });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['access', 'refresh']);
  const access = jwt.decode(res.body.access) as jwt.JwtPayload;
  t.is(access.exp! - access.iat!, 15 * 60);
  t.is(access.token_type, 'access');
  const refresh = jwt.decode(res.body.refresh) as jwt.JwtPayload;
  t.is(refresh.exp! - refresh.iat!, 7 * 24 * 3600);
});

test('token issue accepts the e-mail and any case of the username', async (t) => {
  t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: ADMIN.email, password: ADMIN.password } })).status, 200);
  t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username.toUpperCase(), password: ADMIN.password } })).status, 200);
});

test('wrong password and unknown user give the same 401, whose detail names the cause (issue 30 #7)', async (t) => {
  const wrong = await s.api('POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: 'nope-nope-nope' } });
  const unknown = await s.api('POST', '/api/auth/jwt/token/', { body: { username: 'ghost', password: 'nope-nope-nope' } });
  for (const res of [wrong, unknown]) {
    t.is(res.status, 401);
    t.is(res.body.status, 'error');
    t.is(res.body.code, 'AUTHENTICATION_FAILED');
    t.not(res.body.detail, NOT_PROVIDED);
    t.is(res.body.detail, res.body.message);
  }
  t.deepEqual(wrong.body, unknown.body);
});

test('token issue with SQL and wildcard fragments in the username finds nobody', async (t) => {
  for (const username of ["' OR 1=1 --", '%', 'r__t', "root'; DROP TABLE users; --", 'ro%']) {
    const res = await s.api('POST', '/api/auth/jwt/token/', { body: { username, password: ADMIN.password } });
    t.is(res.status, 401, username);
  }
  t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: ADMIN.password } })).status, 200);
});

test('token issue validates its body', async (t) => {
  const missing = await s.api('POST', '/api/auth/jwt/token/', { body: {} });
  t.is(missing.status, 400);
  t.is(missing.body.code, 'VALIDATION_ERROR');
  t.deepEqual(missing.body.errors, { username: ['This field is required.'], password: ['This field is required.'] });
  const wrongType = await s.api('POST', '/api/auth/jwt/token/', { body: { username: 42, password: ['x'] } });
  t.is(wrongType.status, 400);
  t.deepEqual(Object.keys(wrongType.body.errors).sort(), ['password', 'username']);
});

test('protected routes need a bearer token, with the exact 401 detail', async (t) => {
  const res = await s.api('GET', '/api/profile/');
  t.is(res.status, 401);
  t.is(res.body.detail, NOT_PROVIDED);
  t.is(res.body.code, 'AUTHENTICATION_FAILED');
  t.regex(res.headers.get('www-authenticate') ?? '', /^Bearer/);
});

test('forged, wrong-key, expired, wrong-type and alg:none tokens are refused', async (t) => {
  const { access, refresh } = await s.login();
  const claims = jwt.decode(access) as jwt.JwtPayload;
  const base = { token_type: 'access', gen: claims.gen, tenant: null };
  const opts = { subject: claims.sub, jwtid: 'c0ffee00-0000-4000-8000-000000000000', issuer: 'platform' };
  const cases: Record<string, string> = {
    'wrong key': jwt.sign(base, 'another-secret-key-that-is-long-enough!!', { ...opts, expiresIn: 60 }),
    expired: jwt.sign({ ...base, exp: Math.floor(Date.now() / 1000) - 10 }, TEST_SECRET, opts),
    'refresh as access': refresh,
    'alg none': `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${access.split('.')[1]}.`,
    'tampered payload': `${access.split('.')[0]}.${Buffer.from(JSON.stringify({ ...claims, sub: '00000000-0000-4000-8000-000000000000' })).toString('base64url')}.${access.split('.')[2]}`,
    garbage: 'not-a-jwt',
  };
  for (const [name, token] of Object.entries(cases)) {
    const res = await s.api('GET', '/api/profile/', { token });
    t.is(res.status, 401, name);
    t.is(res.body.code, 'INVALID_TOKEN', name);
    t.is(res.body.detail, NOT_PROVIDED, name);
  }
  t.is((await s.api('GET', '/api/profile/', { token: access })).status, 200);
  t.is((await s.api('GET', '/api/profile/', { headers: { Authorization: `Token ${access}` } })).status, 401);
});

test('refresh gives a new access token; a blacklisted refresh token is refused', async (t) => {
  const { refresh } = await s.login();
  const r1 = await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh } });
  t.is(r1.status, 200);
  t.deepEqual(Object.keys(r1.body), ['access']);
  t.is((await s.api('GET', '/api/profile/', { token: r1.body.access })).status, 200);

  const bl = await s.api('POST', '/api/auth/jwt/token/blacklist/', { body: { refresh } });
  t.is(bl.status, 200);
  t.is(bl.body.status, 'success');
  const r2 = await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh } });
  t.is(r2.status, 401);
  t.is(r2.body.code, 'INVALID_TOKEN');
  t.regex(r2.body.message, /blacklisted/);
  // Blacklisting twice is harmless; an access token cannot be blacklisted or used to refresh.
  t.is((await s.api('POST', '/api/auth/jwt/token/blacklist/', { body: { refresh } })).status, 200);
  t.is((await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh: r1.body.access } })).status, 401);
});

test('the blacklist lives in PostgreSQL: a second server process refuses the token too', async (t) => {
  const { refresh } = await s.login();
  t.is((await s.api('POST', '/api/auth/jwt/token/blacklist/', { body: { refresh } })).status, 200);
  const { startServer } = await import('../main.ts');
  const other = await startServer({ ...s.config, port: 0 }, { migrate: false, announce: () => undefined });
  try {
    const res = await fetch(`${other.url}/api/auth/jwt/token/refresh/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ refresh }),
    });
    t.is(res.status, 401);
  } finally {
    await other.close();
  }
});

test('a stale token on a public route is ignored, so logging in again works', async (t) => {
  const res = await s.api('POST', '/api/auth/jwt/token/', { token: 'garbage', body: { username: ADMIN.username, password: ADMIN.password } });
  t.is(res.status, 200);
});
