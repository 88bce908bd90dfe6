// Social apps (spec Part 1 §4) and headless social login end to end against a real OpenID
// provider (oidc-provider, started here on loopback): PKCE, state and nonce, a wrong state, a
// replayed code, auto-connect only by an address both sides vouch for, an unverified address
// refused, deletion blocked while users are connected, masking, validation, who may, and
// tenant isolation.
import test from 'ava';
import { followToRedirect, startOidcProvider, type TestOidcProvider } from '../../shared/testing/oidc.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { seedSiteUser, siteToken } from './site-users.ts';
import { seedCrm } from './crm.ts';

const REDIRECT = 'http://localhost:5173/callback';
const OP_SECRET = 'op-client-secret-0123456789';

let s: TestServer;
let a: TestSite;
let b: TestSite;
let op: TestOidcProvider;
const tok: Record<string, string> = {};

const sql = (text: string, params: unknown[] = []): Promise<any[]> => s.handle.db.orm.em.fork().getConnection().execute(text, params);

const on = (site: TestSite, method: string, path: string, body?: unknown, token?: string) => s.api(method, path, { host: site.domain, token, body });

/** One sign-in as `account` on `site` through the app `key`: the redirect, the OP, the callback's params. */
async function signIn(site: TestSite, account: string, key = 'company') {
  op.signInAs(account);
  const start = await on(site, 'GET', `/api/auth/${key}/redirect/?redirect_uri=${encodeURIComponent(REDIRECT)}`, undefined, tok[site === a ? 'userA' : 'userB']);
  if (start.status !== 200) throw new Error(start.text);
  const callback = await followToRedirect(start.body.data.authorization_url, REDIRECT);
  return { start: start.body.data, code: callback.get('code')!, state: callback.get('state')!, iss: callback.get('iss') ?? undefined };
}

test.before(async () => {
  op = await startOidcProvider({ clientId: 'platform', clientSecret: OP_SECRET, redirectUri: REDIRECT });
  s = await startTestServer({ SOCIAL_LOGIN_ALLOW_HTTP: 'true', OUTBOUND_ALLOW_CIDRS: '127.0.0.1/32' });
  const em = s.handle.db.orm.em.fork();
  a = await createTestSite(em);
  b = await createTestSite(em);
  await seedSiteUser(s, a, 'boss', { superuser: true });
  await seedSiteUser(s, a, 'pleb');
  await seedSiteUser(s, b, 'boss', { superuser: true });
  tok.adminA = await siteToken(s, a, 'boss');
  tok.userA = await siteToken(s, a, 'pleb');
  tok.adminB = await siteToken(s, b, 'boss');
  tok.userB = tok.adminB;
  const created = await on(a, 'POST', '/api/auth/social-apps/', {
    provider: 'openid_connect', provider_id: 'company', name: 'Company SSO', client_id: 'platform', secret: OP_SECRET, settings: { server_url: op.issuer, icon: 'key', auto_redirect: true },
  }, tok.adminA);
  if (created.status !== 201) throw new Error(created.text);
});
test.after.always(async () => {
  await s?.close();
  await op?.close();
});

test.serial('social apps: create echoes the secret once; retrieve masks it; the public list flattens icon and auto_redirect', async (t) => {
  const list = await on(a, 'GET', '/api/auth/social-apps/');
  t.is(list.status, 200, 'public: no token');
  t.like(list.body, { status: 'success', total: 1, pagination: { page: 1, page_size: 10, total_pages: 1 } });
  t.like(list.body.data[0], { provider: 'openid_connect', provider_id: 'company', name: 'Company SSO', provider_display: 'OpenID Connect', is_configured: true, icon: 'key', auto_redirect: true });
  t.is(list.body.data[0].client_id, undefined, 'no credentials in the public list');
  const id = list.body.data[0].id;
  const one = await on(a, 'GET', `/api/auth/social-apps/${id}/`, undefined, tok.userA);
  t.is(one.status, 200, 'any signed-in user reads it');
  t.like(one.body, { secret: '***HIDDEN***', settings: { server_url: op.issuer, icon: 'key', auto_redirect: true }, key: '' });
  t.is((await on(a, 'GET', `/api/auth/social-apps/${id}/`)).status, 401);
  const [row] = await sql(`SELECT secret_ciphertext FROM "${a.schema}".social_apps WHERE id = ?`, [id]);
  t.false(row.secret_ciphertext.includes(OP_SECRET), 'encrypted at rest');

  const made = await on(a, 'POST', '/api/auth/social-apps/', { provider: 'github', name: 'GitHub', client_id: 'gh', secret: 'gh-secret' }, tok.adminA);
  t.is(made.status, 201, made.text);
  t.like(made.body, { success: true, data: { provider: 'github', provider_id: '', secret: 'gh-secret', provider_display: 'GitHub', is_configured: true } });
  // PATCH keeps omitted fields; GET → change one field → PUT the whole body back works.
  const patched = await on(a, 'PATCH', `/api/auth/social-apps/${made.body.data.id}/`, { name: 'GitHub login' }, tok.adminA);
  t.like(patched.body.data, { name: 'GitHub login', client_id: 'gh', secret: '***HIDDEN***' });
  const got = (await on(a, 'GET', `/api/auth/social-apps/${made.body.data.id}/`, undefined, tok.adminA)).body;
  const put = await on(a, 'PUT', `/api/auth/social-apps/${made.body.data.id}/`, { ...got, client_id: 'gh-2' }, tok.adminA);
  t.is(put.status, 200, put.text);
  t.like(put.body.data, { client_id: 'gh-2', name: 'GitHub login' });
  const [gh] = await sql(`SELECT secret_ciphertext FROM "${a.schema}".social_apps WHERE id = ?`, [made.body.data.id]);
  t.truthy(gh.secret_ciphertext, 'the masked secret sent back kept the stored one');
  t.is((await on(a, 'GET', '/api/auth/social-apps/?provider=github', undefined)).body.total, 1);
  t.is((await on(a, 'GET', '/api/auth/social-apps/?search=sso')).body.data[0].provider_id, 'company');
  t.is((await on(a, 'GET', '/api/auth/social-apps/?page_size=101')).status, 400);
  t.is((await on(a, 'DELETE', `/api/auth/social-apps/${made.body.data.id}/`, undefined, tok.adminA)).status, 200);
});

test.serial('social apps: validation messages as §4; only superusers manage; other sites see nothing', async (t) => {
  const missing = await on(a, 'POST', '/api/auth/social-apps/', {}, tok.adminA);
  t.is(missing.status, 400);
  for (const f of ['provider', 'name', 'client_id', 'secret']) t.deepEqual(missing.body.errors[f], ['This field is required.']);
  const unknown = await on(a, 'POST', '/api/auth/social-apps/', { provider: 'myspace', name: 'x', client_id: 'x', secret: 'x' }, tok.adminA);
  t.regex(unknown.body.errors.provider[0], /not a registered provider.*openid_connect, google, microsoft, gitlab, apple, github/);
  const oidcBare = await on(a, 'POST', '/api/auth/social-apps/', { provider: 'openid_connect', name: 'x', client_id: 'x', secret: 'x' }, tok.adminA);
  t.truthy(oidcBare.body.errors.provider_id);
  t.truthy(oidcBare.body.errors.settings);
  const dup = await on(a, 'POST', '/api/auth/social-apps/', { provider: 'openid_connect', provider_id: 'company', name: 'x', client_id: 'x', secret: 'x', settings: { server_url: op.issuer } }, tok.adminA);
  t.is(dup.status, 400);
  t.truthy(dup.body.errors.provider_id);
  t.is((await on(a, 'POST', '/api/auth/social-apps/', { provider: 'openid_connect', provider_id: 'jwt', name: 'x', client_id: 'x', secret: 'x', settings: { server_url: op.issuer } }, tok.adminA)).status, 400, 'jwt names a route');
  t.is((await on(a, 'POST', '/api/auth/social-apps/', { provider: 'google', name: 'G', client_id: 'x', secret: 'x' }, tok.userA)).status, 403);
  const id = (await on(a, 'GET', '/api/auth/social-apps/')).body.data[0].id;
  t.is((await on(a, 'PATCH', `/api/auth/social-apps/${id}/`, { name: 'mine' }, tok.userA)).status, 403);
  t.is((await on(a, 'DELETE', `/api/auth/social-apps/${id}/`, undefined, tok.userA)).status, 403);
  // Site B: its list is empty, site A's app is not there, A's token is refused.
  t.is((await on(b, 'GET', '/api/auth/social-apps/')).body.total, 0);
  t.is((await on(b, 'GET', `/api/auth/social-apps/${id}/`, undefined, tok.adminB)).status, 404);
  t.is((await on(b, 'PATCH', `/api/auth/social-apps/${id}/`, { name: 'x' }, tok.adminB)).status, 404);
  t.is((await on(b, 'GET', `/api/auth/social-apps/${id}/`, undefined, tok.adminA)).status, 401);
  t.is((await on(b, 'GET', `/api/auth/company/redirect/?redirect_uri=${encodeURIComponent(REDIRECT)}`, undefined, tok.adminB)).status, 404);
  t.is((await s.api('GET', '/api/auth/social-apps/')).status, 404, 'not on the platform host');
});

test.serial('OIDC round trip: PKCE S256, state and nonce; a new user with the verified e-mail; the tokens work on this site only', async (t) => {
  t.is((await on(a, 'GET', `/api/auth/company/redirect/?redirect_uri=${encodeURIComponent(REDIRECT)}`)).status, 401, 'the redirect needs a bearer token');
  t.is((await on(a, 'GET', '/api/auth/company/redirect/', undefined, tok.userA)).status, 400, 'redirect_uri is required');
  op.accounts.set('carol-sub', { email: 'carol@example.com', email_verified: true, preferred_username: 'carol', given_name: 'Carol', family_name: 'Smith' });
  const flow = await signIn(a, 'carol-sub');
  const url = new URL(flow.start.authorization_url);
  t.is(url.origin, op.issuer);
  t.is(url.searchParams.get('code_challenge_method'), 'S256');
  t.truthy(url.searchParams.get('code_challenge'));
  t.truthy(url.searchParams.get('nonce'));
  t.is(url.searchParams.get('state'), flow.start.state);
  const [stored] = await sql(`SELECT count(*)::int AS n FROM "${a.schema}".social_login_states WHERE state_hash = sha256(convert_to(?, 'UTF8'))`, [flow.start.state]);
  t.is(stored.n, 1, 'the state is kept server-side (hashed)');

  const res = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(res.status, 200, res.text);
  t.true(res.body.created);
  t.like(res.body.user, { username: 'carol', email: 'carol@example.com' });
  const profile = await on(a, 'GET', '/api/profile/', undefined, res.body.access);
  t.is(profile.status, 200, profile.text);
  t.is(profile.body.username, 'carol');
  t.is((await on(b, 'GET', '/api/profile/', undefined, res.body.access)).status, 401, 'bound to its site');
  const [user] = await sql(`SELECT email_verified, password FROM "${a.schema}".users WHERE uuid = ?`, [res.body.user.uuid]);
  t.like(user, { email_verified: true, password: null });
  t.is((await on(a, 'POST', '/api/auth/jwt/token/refresh/', { refresh: res.body.refresh })).status, 200);

  // The same identity again: the same user, not a new one.
  const again = await signIn(a, 'carol-sub');
  const second = await on(a, 'POST', '/api/auth/company/token/', { code: again.code, state: again.state, iss: again.iss });
  t.is(second.status, 200, second.text);
  t.false(second.body.created);
  t.is(second.body.user.uuid, res.body.user.uuid);
});

test.serial('a wrong state, a replayed code and a code under another state are refused', async (t) => {
  op.accounts.set('dave-sub', { email: 'dave@example.com', email_verified: true, preferred_username: 'dave' });
  const flow = await signIn(a, 'dave-sub');
  const wrong = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: 'not-the-state' });
  t.is(wrong.status, 400);
  t.regex(wrong.body.message, /Invalid or expired state/);
  t.is((await on(a, 'POST', '/api/auth/company/token/', { code: flow.code })).status, 400, 'state is required');
  const ok = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(ok.status, 200, ok.text);
  const replay = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(replay.status, 400, 'the state was used once');
  // A fresh state with the used code: the provider refuses the code.
  const other = await on(a, 'GET', `/api/auth/company/redirect/?redirect_uri=${encodeURIComponent(REDIRECT)}`, undefined, tok.userA);
  const reused = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: other.body.data.state, iss: flow.iss });
  t.is(reused.status, 400);
  t.regex(reused.body.message, /provider refused/);
  t.false(JSON.stringify(reused.body).includes(OP_SECRET));
  const [n] = await sql(`SELECT count(*)::int AS n FROM "${a.schema}".users WHERE username LIKE 'dave%'`);
  t.is(n.n, 1, 'one user, made by the one good exchange');
});

test.serial("issue 29 #11: an ID token signed by a foreign key under the provider's real kid is refused; nothing is created; the genuine token still works", async (t) => {
  op.accounts.set('forged-sub', { email: 'forged@example.com', email_verified: true, preferred_username: 'forged' });
  const users = async () => (await sql(`SELECT count(*)::int AS n FROM "${a.schema}".users WHERE username LIKE 'forged%' OR lower(email) = 'forged@example.com'`))[0].n;
  const accounts = async () => (await sql(`SELECT count(*)::int AS n FROM "${a.schema}".social_accounts WHERE subject = 'forged-sub'`))[0].n;
  let flow = await signIn(a, 'forged-sub');
  const forged = op.forgeNextIdToken();
  const refused = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  const kids = await forged;
  t.is(kids.forgedKid, kids.genuineKid, "the forged token carries the provider's real kid");
  t.is(refused.status, 400, refused.text);
  t.regex(refused.body.message, /provider refused the sign-in/);
  t.falsy(refused.body.access, 'no tokens');
  t.is(await users(), 0, 'no user');
  t.is(await accounts(), 0, 'no connection');
  flow = await signIn(a, 'forged-sub');
  const genuine = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(genuine.status, 200, genuine.text);
  t.true(genuine.body.created);
  t.is(await users(), 1);
});

test.serial('auto-connect: only to an address both sides vouch for; an unverified address that matches is refused, never a second account', async (t) => {
  // Erin: made by an administrator (vouched); the provider verified the address → connected.
  const erin = await seedSiteUser(s, a, 'erin', { email: 'erin@example.com', emailVerified: true });
  op.accounts.set('erin-sub', { email: 'erin@example.com', email_verified: true, preferred_username: 'erin-at-op' });
  let flow = await signIn(a, 'erin-sub');
  const connected = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(connected.status, 200, connected.text);
  t.false(connected.body.created);
  t.is(connected.body.user.uuid, erin);

  // Frank exists; the provider does not vouch for the address → refused, nothing made.
  await seedSiteUser(s, a, 'frank', { email: 'frank@example.com', emailVerified: true });
  op.accounts.set('mallory-sub', { email: 'frank@example.com', email_verified: false, preferred_username: 'mallory' });
  flow = await signIn(a, 'mallory-sub');
  const refused = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(refused.status, 403);
  t.regex(refused.body.message, /not verified the address/);
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".users WHERE lower(email) = 'frank@example.com' OR username LIKE 'mallory%'`))[0].n, 1);
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".social_accounts WHERE subject = 'mallory-sub'`))[0].n, 0);

  // Grace typed the victim's address into her own profile: never auto-connected to it.
  const graceToken = (await seedSiteUser(s, a, 'grace'), await siteToken(s, a, 'grace'));
  t.is((await on(a, 'PUT', '/api/profile/', { email: 'victim@example.com' }, graceToken)).status, 200);
  op.accounts.set('victim-sub', { email: 'victim@example.com', email_verified: true, preferred_username: 'victim' });
  flow = await signIn(a, 'victim-sub');
  const hijack = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(hijack.status, 403);
  t.regex(hijack.body.message, /never verified/);

  // No match, unverified: a new user without the address.
  op.accounts.set('henry-sub', { email: 'henry@example.com', email_verified: false, preferred_username: 'henry' });
  flow = await signIn(a, 'henry-sub');
  const henry = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(henry.status, 200, henry.text);
  t.true(henry.body.created);
  t.is(henry.body.user.email, '');
});

test.serial("a social sign-in that makes a user publishes the site's user-creation events: PRE can refuse it, POST follows it", async (t) => {
  await seedCrm(s, [a]);
  const fn = async (name: string, code: string) => (await on(a, 'POST', '/api/apps/crm/functions/', { name, code }, tok.adminA)).body.id;
  const gate = await fn('gate', 'export default (e) => { if (e.user.email.startsWith("blocked")) throw new Error("not on the list"); }');
  const hello = await fn('hello', 'export default (e) => e.user.username');
  t.is((await on(a, 'POST', '/api/cloud/events/PRE_USER_CREATE/subscribe/', { function_id: gate }, tok.adminA)).status, 200);
  t.is((await on(a, 'POST', '/api/cloud/events/POST_USER_CREATE/subscribe/', { function_id: hello }, tok.adminA)).status, 200);
  op.accounts.set('blocked-sub', { email: 'blocked@example.com', email_verified: true, preferred_username: 'blocked' });
  let flow = await signIn(a, 'blocked-sub');
  const refused = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(refused.status, 422, refused.text);
  t.regex(refused.body.message, /not on the list/);
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".users WHERE username = 'blocked'`))[0].n, 0);
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".social_accounts WHERE subject = 'blocked-sub'`))[0].n, 0);
  op.accounts.set('ivy-sub', { email: 'ivy@example.com', email_verified: true, preferred_username: 'ivy' });
  flow = await signIn(a, 'ivy-sub');
  const ivy = await on(a, 'POST', '/api/auth/company/token/', { code: flow.code, state: flow.state, iss: flow.iss });
  t.is(ivy.status, 200, ivy.text);
  let post: { status: string; result: unknown; invoked_by: string }[] = [];
  for (let i = 0; i < 100 && post[0]?.status !== 'succeeded'; i++) {
    post = await sql(`SELECT status, result, invoked_by FROM "${a.schema}".function_invocations WHERE event = 'POST_USER_CREATE'`);
    await new Promise((r) => setTimeout(r, 50));
  }
  t.like(post[0], { status: 'succeeded', result: 'ivy', invoked_by: ivy.body.user.uuid }, 'run as the new user (no one else acts)');
  for (const [event, id] of [['PRE_USER_CREATE', gate], ['POST_USER_CREATE', hello]] as const) await on(a, 'POST', `/api/cloud/events/${event}/unsubscribe/`, { function_id: id }, tok.adminA);
});

test.serial('delete is blocked while active users are connected (400 with active_users and a suggestion)', async (t) => {
  const id = (await on(a, 'GET', '/api/auth/social-apps/')).body.data.find((x: { provider_id: string }) => x.provider_id === 'company').id;
  const blocked = await on(a, 'DELETE', `/api/auth/social-apps/${id}/`, undefined, tok.adminA);
  t.is(blocked.status, 400);
  t.like(blocked.body, { success: false });
  t.true(blocked.body.active_users >= 4);
  t.truthy(blocked.body.suggestion);
  t.is((await on(a, 'GET', `/api/auth/social-apps/${id}/`, undefined, tok.adminA)).status, 200, 'still there');
});
