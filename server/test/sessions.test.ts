// Browser sessions of the browsable API (spec Part 1 §5.6): cookie attributes, server-side
// state, CSRF on unsafe methods, bearer precedence, the ways a session ends (sign-out,
// revocation, expiry, password change, deactivation), and isolation between the platform and
// sites. The same flow in a real browser: docs-browser.test.ts.
import { createHash } from 'node:crypto';
import test from 'ava';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { ADMIN, request, startTestServer, type ApiResponse, type RequestOptions, type TestServer } from './helpers.ts';
import { FIXTURE_PASSWORD, makeUser, sql, type TestUser } from './site-fixtures.ts';
import { within1s } from './processes.ts';
import { seedSiteUser } from './site-users.ts';

let s: TestServer;
let root: string;

test.before(async () => {
  s = await startTestServer({ LOG_LEVEL: 'error' });
  root = (await s.login()).access;
});
test.after.always(async () => s?.close());

interface Browser {
  /** Cookie name → value, as a browser would keep them for the server's host. */
  jar: Map<string, string>;
  csrf?: string;
  call: (method: string, path: string, options?: RequestOptions) => Promise<ApiResponse>;
}

/** A cookie-keeping client: sends its cookies, applies every Set-Cookie (deletions included). */
function browser(host?: string): Browser {
  const jar = new Map<string, string>();
  const b: Browser = {
    jar,
    async call(method, path, options = {}) {
      const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const res = await s.api(method, path, { host, ...options, headers: { ...(cookie ? { Cookie: cookie } : {}), ...options.headers } });
      for (const line of res.headers.getSetCookie()) {
        const [pair, ...attrs] = line.split(';');
        const [name, value] = pair.split('=');
        const expired = attrs.some((a) => /^\s*expires=Thu, 01 Jan 1970/i.test(a));
        if (expired || !value) jar.delete(name);
        else jar.set(name, value);
      }
      return res;
    },
  };
  return b;
}

async function signIn(b: Browser, username: string, password: string, path = '/api/auth/session/'): Promise<ApiResponse> {
  const res = await b.call('POST', path, { body: { username, password } });
  if (res.status === 200) b.csrf = res.body.csrf_token;
  return res;
}

const withCsrf = (b: Browser, body?: unknown): RequestOptions => ({ body, headers: { 'X-CSRF-Token': b.csrf! } });

async function signedInUser(): Promise<{ user: TestUser; b: Browser }> {
  const user = await makeUser(s, root);
  const b = browser();
  const res = await signIn(b, user.username, FIXTURE_PASSWORD);
  if (res.status !== 200) throw new Error(res.text);
  return { user, b };
}

const firstName = async (uuid: string) => (await sql(s, 'SELECT first_name FROM public.users WHERE uuid = ?', [uuid]))[0].first_name;

test('sign-in sets an HttpOnly SameSite=Strict cookie whose session lives in PostgreSQL, hashed', async (t) => {
  const user = await makeUser(s, root);
  const b = browser();
  const res = await signIn(b, user.username, FIXTURE_PASSWORD);
  t.is(res.status, 200);
  t.like(res.body, { username: user.username, user_uuid: user.uuid });
  t.regex(res.body.csrf_token, /^[A-Za-z0-9_-]{43}$/);
  const [cookie] = res.headers.getSetCookie();
  t.regex(cookie, /^sessionid=[A-Za-z0-9_-]{43}; /);
  t.regex(cookie, /; httponly/i);
  t.regex(cookie, /; samesite=strict/i);
  t.regex(cookie, /; path=\//);
  t.regex(cookie, /; expires=/i);
  t.notRegex(cookie, /; secure/i, 'plain http: no Secure attribute (set over https)');
  const key = b.jar.get('sessionid')!;
  const rows = await sql(s, 'SELECT id, key_hash, site_schema, user_uuid, expires_at FROM public.sessions WHERE user_uuid = ?', [user.uuid]);
  t.is(rows.length, 1);
  t.is(rows[0].id, res.body.id);
  t.is(rows[0].site_schema, null);
  t.deepEqual(Buffer.from(rows[0].key_hash), createHash('sha256').update(key).digest(), 'only the hash of the key is stored');
  const ttl = new Date(rows[0].expires_at).getTime() - Date.now();
  t.true(ttl > 8 * 3600_000 - 60_000 && ttl <= 8 * 3600_000, 'SESSION_TTL_SECONDS defaults to 8 hours');

  const me = await b.call('GET', '/api/profile/');
  t.is(me.status, 200);
  t.is(me.body.username, user.username);
  const current = await b.call('GET', '/api/auth/session/');
  t.is(current.status, 200);
  t.deepEqual(current.body, res.body);
});

test('wrong credentials and a foreign Origin open no session', async (t) => {
  const user = await makeUser(s, root);
  const b = browser();
  const wrong = await signIn(b, user.username, 'not-the-password');
  t.is(wrong.status, 401);
  t.is(wrong.body.message, 'No active account found with the given credentials.');
  t.deepEqual(wrong.headers.getSetCookie(), []);
  const foreign = await b.call('POST', '/api/auth/session/', { body: { username: user.username, password: FIXTURE_PASSWORD }, headers: { Origin: 'https://evil.example' } });
  t.is(foreign.status, 403);
  t.regex(foreign.body.message, /^CSRF Failed: Origin "https:\/\/evil.example" does not match the host\.$/);
  t.deepEqual(foreign.headers.getSetCookie(), []);
  t.is((await sql(s, 'SELECT count(*)::int AS n FROM public.sessions WHERE user_uuid = ?', [user.uuid]))[0].n, 0);
  t.is((await b.call('GET', '/api/profile/')).status, 401);
});

test('unsafe methods need the CSRF token and a same-host Origin; refused requests change nothing', async (t) => {
  const { user, b } = await signedInUser();
  const none = await b.call('PUT', '/api/profile/', { body: { first_name: 'Forged' } });
  t.is(none.status, 403);
  t.is(none.body.message, 'CSRF Failed: X-CSRF-Token header missing.');
  const wrong = await b.call('PUT', '/api/profile/', { body: { first_name: 'Forged' }, headers: { 'X-CSRF-Token': 'x'.repeat(43) } });
  t.is(wrong.status, 403);
  t.is(wrong.body.message, 'CSRF Failed: X-CSRF-Token header incorrect.');
  const other = await signedInUser();
  const foreignToken = await b.call('PUT', '/api/profile/', withCsrf(other.b, { first_name: 'Forged' }));
  t.is(foreignToken.status, 403, "another session's token is not this session's");
  const foreignOrigin = await b.call('PUT', '/api/profile/', { body: { first_name: 'Forged' }, headers: { 'X-CSRF-Token': b.csrf!, Origin: 'http://evil.example' } });
  t.is(foreignOrigin.status, 403);
  t.is(await firstName(user.uuid), 'Fix');

  const ok = await b.call('PUT', '/api/profile/', { ...withCsrf(b, { first_name: 'Real' }), headers: { 'X-CSRF-Token': b.csrf!, Origin: s.url } });
  t.is(ok.status, 200);
  t.is(await firstName(user.uuid), 'Real');
  t.is((await b.call('GET', '/api/profile/')).status, 200, 'safe methods need no token');
});

test('a bearer token takes precedence over the cookie and needs no CSRF token', async (t) => {
  const { b } = await signedInUser();
  const other = await makeUser(s, root);
  const me = await b.call('GET', '/api/profile/', { token: other.token });
  t.is(me.body.username, other.username);
  const patch = await b.call('PUT', '/api/profile/', { token: other.token, body: { first_name: 'Bearer' } });
  t.is(patch.status, 200);
  t.is(await firstName(other.uuid), 'Bearer');
  t.is((await b.call('GET', '/api/auth/session/', { token: other.token })).status, 404, 'a bearer request has no session');
});

test('sign-out ends the session server-side and clears the cookie; a dead cookie is ignored on public routes', async (t) => {
  const { user, b } = await signedInUser();
  const key = b.jar.get('sessionid')!;
  t.is((await b.call('DELETE', '/api/auth/session/')).status, 403, 'sign-out needs the CSRF token too');
  const out = await b.call('DELETE', '/api/auth/session/', withCsrf(b));
  t.is(out.status, 200);
  t.deepEqual(out.body, { status: 'success', message: 'Signed out.' });
  t.false(b.jar.has('sessionid'), 'Set-Cookie deletes the cookie');
  t.is((await sql(s, 'SELECT count(*)::int AS n FROM public.sessions WHERE user_uuid = ?', [user.uuid]))[0].n, 0);

  // A copy of the cookie kept elsewhere is refused, and told to go.
  const replay = await s.api('GET', '/api/profile/', { headers: { Cookie: `sessionid=${key}` } });
  t.is(replay.status, 401);
  t.is(replay.body.message, 'Session has expired or ended: sign in again.');
  t.regex(replay.headers.getSetCookie()[0], /^sessionid=; .*expires=Thu, 01 Jan 1970/i);
  const token = await s.api('POST', '/api/auth/jwt/token/', { body: { username: user.username, password: FIXTURE_PASSWORD }, headers: { Cookie: `sessionid=${key}` } });
  t.is(token.status, 200, 'a public route ignores a dead cookie');
  const garbage = await s.api('GET', '/api/profile/', { headers: { Cookie: 'sessionid=not-a-key' } });
  t.is(garbage.status, 401);
});

test('a session ends when it expires, when the password changes and when the user is deactivated', async (t) => {
  const expiring = await signedInUser();
  await sql(s, "UPDATE public.sessions SET expires_at = now() - interval '1 second' WHERE user_uuid = ?", [expiring.user.uuid]);
  t.is((await expiring.b.call('GET', '/api/profile/')).status, 401);

  const changing = await signedInUser();
  const second = browser();
  await signIn(second, changing.user.username, FIXTURE_PASSWORD);
  const changed = await changing.b.call('POST', '/api/profile/change-password/', withCsrf(changing.b, { old_password: FIXTURE_PASSWORD, new_password: 'next-password-1' }));
  t.is(changed.status, 200);
  t.is((await changing.b.call('GET', '/api/profile/')).status, 401, 'the session that changed it ends too');
  t.is((await second.call('GET', '/api/profile/')).status, 401, 'and every other session of the user');
  t.is((await signIn(browser(), changing.user.username, 'next-password-1')).status, 200);

  const deactivated = await signedInUser();
  t.is((await s.api('PUT', `/api/cloud/users/${deactivated.user.username}/`, { token: root, body: { is_active: false } })).status, 200);
  t.is((await deactivated.b.call('GET', '/api/profile/')).status, 401);
});

test('another server process accepts the session and refuses it at once when it ends', async (t) => {
  const { startServer } = await import('../main.ts');
  const other = await startServer({ ...s.config, port: 0 }, { migrate: false, announce: () => undefined });
  try {
    const there = (key: string) => request(other.url, 'GET', '/api/profile/', { headers: { Cookie: `sessionid=${key}` } });
    const out = await signedInUser();
    const outKey = out.b.jar.get('sessionid')!;
    t.is((await there(outKey)).status, 200, 'the other process knows the session (and caches its user)');
    await out.b.call('DELETE', '/api/auth/session/', withCsrf(out.b));
    t.is((await there(outKey)).status, 401, 'signed out here: refused there (its row is gone: no cache to wait for)');

    const changing = await signedInUser();
    const key = changing.b.jar.get('sessionid')!;
    t.is((await there(key)).status, 200);
    await changing.b.call('POST', '/api/profile/change-password/', withCsrf(changing.b, { old_password: FIXTURE_PASSWORD, new_password: 'next-password-2' }));
    const refused = await within1s(() => there(key), (res) => res.status === 401);
    t.is(refused.status, 401, "password changed here: refused there (the user's cached auth state is invalidated by NOTIFY)");
  } finally {
    await other.close();
  }
});

test("sessions are listed and revocable by their user, and nobody else's can be", async (t) => {
  const { user, b } = await signedInUser();
  const laptop = browser();
  await signIn(laptop, user.username, FIXTURE_PASSWORD);
  const list = await b.call('GET', '/api/auth/sessions/');
  t.is(list.status, 200);
  t.is(list.body.length, 2);
  const mine = list.body.find((x: { current: boolean }) => x.current);
  const theirs = list.body.find((x: { current: boolean }) => !x.current);
  t.is(mine.id, (await b.call('GET', '/api/auth/session/')).body.id);
  t.like(theirs, { ip: '127.0.0.1', current: false });

  const stranger = await signedInUser();
  const foreign = await stranger.b.call('DELETE', `/api/auth/sessions/${theirs.id}/`, withCsrf(stranger.b));
  t.is(foreign.status, 404);
  t.is((await laptop.call('GET', '/api/profile/')).status, 200, "a stranger's revocation changes nothing");
  t.is((await s.api('DELETE', `/api/auth/sessions/${theirs.id}/`, { token: root })).status, 404, 'not even a superuser revokes it here');
  t.is((await b.call('DELETE', '/api/auth/sessions/not-a-uuid/', withCsrf(b))).status, 400);

  const revoked = await b.call('DELETE', `/api/auth/sessions/${theirs.id}/`, withCsrf(b));
  t.is(revoked.status, 200);
  t.is((await laptop.call('GET', '/api/profile/')).status, 401);
  t.is((await b.call('GET', '/api/profile/')).status, 200);
  t.is((await b.call('GET', '/api/auth/sessions/')).body.length, 1);
});

test('a site user signs in on the site; the session is valid there only, and platform sessions are not valid on sites', async (t) => {
  const em = s.handle.db.orm.em.fork();
  const a: TestSite = await createTestSite(em);
  const b: TestSite = await createTestSite(em);
  await seedSiteUser(s, a, 'walker');
  await seedSiteUser(s, b, 'walker');
  const onA = browser(a.domain);
  const res = await signIn(onA, 'walker', 'Site-pass-word-1');
  t.is(res.status, 200);
  t.regex(res.headers.getSetCookie()[0], new RegExp(`^sessionid_${a.schema}=`));
  const key = onA.jar.get(`sessionid_${a.schema}`)!;
  t.is((await onA.call('GET', '/api/profile/')).body.username, 'walker');
  t.is((await sql(s, 'SELECT site_schema FROM public.sessions WHERE id = ?', [res.body.id]))[0].site_schema, a.schema);

  // The same key under site B's name, on B; under the platform's name, on the platform.
  t.is((await s.api('GET', '/api/profile/', { host: b.domain, headers: { Cookie: `sessionid_${b.schema}=${key}` } })).status, 401);
  t.is((await s.api('GET', '/api/profile/', { headers: { Cookie: `sessionid=${key}` } })).status, 401);
  // A platform session (even the superuser's) is nothing on a site.
  const platform = browser();
  await signIn(platform, ADMIN.username, ADMIN.password);
  const platformKey = platform.jar.get('sessionid')!;
  t.is((await s.api('GET', '/api/profile/', { host: a.domain, headers: { Cookie: `sessionid_${a.schema}=${platformKey}` } })).status, 401);
  t.is((await s.api('GET', '/api/profile/', { host: a.domain, headers: { Cookie: `sessionid=${platformKey}` } })).status, 401);

  // The platform host's /sites/{schema}/ form reaches site A with A's cookie.
  const viaPrefix = browser();
  const signedIn = await signIn(viaPrefix, 'walker', 'Site-pass-word-1', `/sites/${a.schema}/api/auth/session/`);
  t.is(signedIn.status, 200);
  t.is((await viaPrefix.call('GET', `/sites/${a.schema}/api/profile/`)).body.username, 'walker');
  t.is((await viaPrefix.call('GET', `/sites/${b.schema}/api/profile/`)).status, 401);
});
