// Site users and their tokens: sign-in on a site (own password, or the linked platform
// account's current one), tokens bound to one site, refresh and blacklist per site, the
// site-level profile, public profiles and user administration — and isolation between sites
// and from the platform.
import test from 'ava';
import { hashPassword } from '../../shared/auth/passwords.ts';
import type { UserActor } from '../../shared/auth/actor.ts';
import { listApps } from '../../shared/apps/app.service.ts';
import { makeContext } from '../../shared/context.ts';
import { createOrganization, listOrganizations } from '../../shared/organizations/organization.service.ts';
import { listSecrets } from '../../shared/secrets/secret.service.ts';
import { listSiteUsers } from '../../shared/tenancy/tenant-users.service.ts';
import { listUsers } from '../../shared/users/user.service.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';

let s: TestServer;
let root: string;
let a: TestSite;
let b: TestSite;
const OWNER_PASSWORD = 'Owner-pass-word-1';
const CAROL_A = 'Carol-in-site-a-1';
const CAROL_B = 'Carol-in-site-b-1';
const ids: Record<string, string> = {};

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

/**
 * A site user straight in the site's schema (the sites API seeds in its own suite). A linked
 * one is an admin of the site's organization, as the sites API makes them.
 */
async function seedSiteUser(site: TestSite, u: { username: string; password?: string; platformUserUuid?: string; admin?: boolean }): Promise<string> {
  if (u.platformUserUuid) {
    await sql(
      `INSERT INTO public.organization_members (uuid, organization_uuid, user_uuid, is_admin) VALUES (gen_random_uuid(), ?, ?, true) ON CONFLICT DO NOTHING`,
      [site.organizationUuid, u.platformUserUuid],
    );
  }
  const [row] = await sql(
    `INSERT INTO "${site.schema}".users (uuid, username, email, password, platform_user_uuid, is_staff, is_superuser, first_name, last_name)
     VALUES (gen_random_uuid(), ?, ?, ?, ?, ?, ?, 'First', 'Last') RETURNING uuid`,
    [u.username, `${u.username}@${site.slug}.example`, u.password ? await hashPassword(u.password) : null, u.platformUserUuid ?? null, !!u.admin, !!u.admin],
  );
  return row.uuid;
}

const on = (site: TestSite) => ({ host: site.domain });
const login = (site: TestSite, username: string, password: string) => s.api('POST', '/api/auth/jwt/token/', { ...on(site), body: { username, password } });
async function tokens(site: TestSite, username: string, password: string): Promise<{ access: string; refresh: string }> {
  const res = await login(site, username, password);
  if (res.status !== 200) throw new Error(`site login failed: ${res.status} ${res.text}`);
  return res.body;
}
const claims = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8'));

test.before(async () => {
  s = await startTestServer();
  root = (await s.login()).access;
  for (const username of ['owner', 'outsider']) {
    const res = await s.api('POST', '/api/cloud/users/', { token: root, body: { username, email: `${username}@example.com`, password: OWNER_PASSWORD } });
    if (res.status !== 201) throw new Error(res.text);
    ids[username] = res.body.data.uuid;
  }
  const em = s.handle.db.orm.em.fork();
  a = await createTestSite(em, { ownerUuid: ids.owner });
  b = await createTestSite(em, { ownerUuid: ids.owner });
  for (const site of [a, b]) await seedSiteUser(site, { username: 'owner', platformUserUuid: ids.owner, admin: true });
  ids.carolA = await seedSiteUser(a, { username: 'carol', password: CAROL_A });
  ids.carolB = await seedSiteUser(b, { username: 'carol', password: CAROL_B });
  await seedSiteUser(a, { username: 'erin', password: CAROL_A });
});
test.after.always(async () => {
  await s?.close();
});

test('a linked admin signs in on the site with the platform password; the token names the site', async (t) => {
  const res = await login(a, 'owner', OWNER_PASSWORD);
  t.is(res.status, 200, res.text);
  t.deepEqual(Object.keys(res.body).sort(), ['access', 'refresh']);
  t.is(claims(res.body.access).tenant, a.schema);
  t.is(claims(res.body.refresh).tenant, a.schema);
  // The same through /sites/{schema}/ on the platform host, and by e-mail.
  const viaPath = await s.api('POST', `/sites/${a.schema}/api/auth/jwt/token/`, { body: { username: `OWNER@${a.slug}.example`, password: OWNER_PASSWORD } });
  t.is(viaPath.status, 200, viaPath.text);
  const profile = await s.api('GET', '/api/profile/', { ...on(a), token: res.body.access });
  t.is(profile.status, 200);
  t.like(profile.body, { username: 'owner', is_superuser: true, is_staff: true, platform_user_uuid: ids.owner });
  t.not(profile.body.uuid, ids.owner, 'the site user is its own row');
  t.is((await login(a, 'owner', 'wrong-password-1')).status, 401);
});

test('site users have their own passwords: same username, other site, other password', async (t) => {
  t.is((await login(a, 'carol', CAROL_A)).status, 200);
  t.is((await login(b, 'carol', CAROL_B)).status, 200);
  const wrong = await login(a, 'carol', CAROL_B);
  t.is(wrong.status, 401);
  t.like(wrong.body, { code: 'AUTHENTICATION_FAILED', message: 'No active account found with the given credentials.' });
  // Site users do not exist on the platform, platform-only users not on the site.
  t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: 'carol', password: CAROL_A } })).status, 401);
  t.is((await login(a, 'outsider', OWNER_PASSWORD)).status, 401);
  t.is((await login(a, 'root', 'root-password-1')).status, 401, 'the platform superuser is not a site user');
});

test('a site token works on its site only: not on another site (host or path), not on the platform', async (t) => {
  const { access } = await tokens(a, 'carol', CAROL_A);
  t.is((await s.api('GET', '/api/profile/', { ...on(a), token: access })).status, 200);
  t.is((await s.api('GET', `/sites/${a.schema}/api/profile/`, { token: access })).status, 200);
  for (const res of [
    await s.api('GET', '/api/profile/', { ...on(b), token: access }),
    await s.api('GET', `/sites/${b.schema}/api/profile/`, { token: access }),
    await s.api('GET', '/api/profile/', { token: access }),
  ]) {
    t.is(res.status, 401);
    t.like(res.body, { code: 'INVALID_TOKEN', message: 'Token is not valid on this host.' });
  }
  const platform = await s.api('GET', '/api/profile/', { ...on(a), token: root });
  t.is(platform.status, 401);
  t.is(platform.body.code, 'INVALID_TOKEN');
  t.is((await s.api('GET', `/sites/${a.schema}/api/secrets/`, { token: root })).status, 401);
});

test('a platform password change applies on the site: old refused, new accepted, old site tokens revoked', async (t) => {
  // Its own linked user: tests run concurrently, and this one changes the password.
  const res = await s.api('POST', '/api/cloud/users/', { token: root, body: { username: 'linked1', password: OWNER_PASSWORD } });
  await seedSiteUser(b, { username: 'linked1', platformUserUuid: res.body.data.uuid, admin: true });
  const { access } = await tokens(b, 'linked1', OWNER_PASSWORD);
  const changed = 'Linked-new-pass-2';
  t.is((await s.api('PUT', '/api/cloud/users/linked1/', { token: root, body: { password: changed } })).status, 200);
  t.is((await login(b, 'linked1', OWNER_PASSWORD)).status, 401);
  t.is((await login(b, 'linked1', changed)).status, 200);
  const stale = await s.api('GET', '/api/profile/', { ...on(b), token: access });
  t.is(stale.status, 401);
  t.is(stale.body.message, 'Token has been revoked.');
  // Changing it through the platform's own profile route works the same way.
  const platform = await s.login('linked1', changed);
  const self = await s.api('POST', '/api/profile/change-password/', { token: platform.access, body: { old_password: changed, new_password: 'Linked-third-pass-3' } });
  t.is(self.status, 200);
  t.is((await login(b, 'linked1', changed)).status, 401);
  t.is((await login(b, 'linked1', 'Linked-third-pass-3')).status, 200);
});

test('a deactivated platform user can no longer sign in on the site, nor use its site tokens', async (t) => {
  const res = await s.api('POST', '/api/cloud/users/', { token: root, body: { username: 'linked2', password: OWNER_PASSWORD } });
  await seedSiteUser(a, { username: 'linked2', platformUserUuid: res.body.data.uuid, admin: true });
  const { access, refresh } = await tokens(a, 'linked2', OWNER_PASSWORD);
  t.is((await s.api('PUT', '/api/cloud/users/linked2/', { token: root, body: { is_active: false } })).status, 200);
  t.is((await login(a, 'linked2', OWNER_PASSWORD)).status, 401);
  t.is((await s.api('GET', '/api/profile/', { ...on(a), token: access })).status, 401);
  t.is((await s.api('POST', '/api/auth/jwt/token/refresh/', { ...on(a), body: { refresh } })).status, 401);
  t.is((await s.api('PUT', '/api/cloud/users/linked2/', { token: root, body: { is_active: true } })).status, 200);
  t.is((await login(a, 'linked2', OWNER_PASSWORD)).status, 200);
  t.is((await s.api('DELETE', '/api/cloud/users/linked2/', { token: root })).status, 200);
  t.is((await login(a, 'linked2', OWNER_PASSWORD)).status, 401, 'a deleted platform account signs in nowhere');
});

test('refresh and blacklist work per site', async (t) => {
  const { refresh } = await tokens(a, 'erin', CAROL_A);
  const refreshed = await s.api('POST', '/api/auth/jwt/token/refresh/', { ...on(a), body: { refresh } });
  t.is(refreshed.status, 200, refreshed.text);
  t.is(claims(refreshed.body.access).tenant, a.schema);
  t.is((await s.api('GET', '/api/profile/', { ...on(a), token: refreshed.body.access })).status, 200);
  // Elsewhere the refresh token is not valid: another site, the platform (refresh and blacklist).
  for (const res of [
    await s.api('POST', '/api/auth/jwt/token/refresh/', { ...on(b), body: { refresh } }),
    await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh } }),
    await s.api('POST', '/api/auth/jwt/token/blacklist/', { ...on(b), body: { refresh } }),
    await s.api('POST', '/api/auth/jwt/token/blacklist/', { body: { refresh } }),
  ]) {
    t.is(res.status, 401);
    t.is(res.body.message, 'Token is not valid on this host.');
  }
  const platformRefresh = (await s.login()).refresh;
  t.is((await s.api('POST', '/api/auth/jwt/token/refresh/', { ...on(a), body: { refresh: platformRefresh } })).status, 401);

  const out = await s.api('POST', `/sites/${a.schema}/api/auth/jwt/token/blacklist/`, { body: { refresh } });
  t.is(out.status, 200);
  t.deepEqual(out.body, { status: 'success', message: 'Token blacklisted.' });
  const again = await s.api('POST', '/api/auth/jwt/token/refresh/', { ...on(a), body: { refresh } });
  t.is(again.status, 401);
  t.is(again.body.message, 'Token is blacklisted.');
  const jti = claims(refresh).jti;
  t.is((await sql(`SELECT 1 FROM "${a.schema}".token_blacklist WHERE jti = ?`, [jti])).length, 1);
  t.is((await sql(`SELECT 1 FROM "${b.schema}".token_blacklist WHERE jti = ?`, [jti])).length, 0);
  t.is((await sql('SELECT 1 FROM public.token_blacklist WHERE jti = ?', [jti])).length, 0);
});

test('site profile: update, change own password (revokes tokens); linked users change it on the platform', async (t) => {
  const uuid = await seedSiteUser(a, { username: 'frank', password: CAROL_A });
  const { access } = await tokens(a, 'frank', CAROL_A);
  const put = await s.api('PUT', '/api/profile/', { ...on(a), token: access, body: { first_name: 'Franky' } });
  t.is(put.status, 200);
  t.like(put.body, { uuid, username: 'frank', first_name: 'Franky', platform_user_uuid: null });
  t.is((await s.api('PUT', '/api/profile/', { ...on(a), token: access, body: { username: 'carol' } })).body.errors?.username?.[0], 'A user with that username already exists.');
  const wrongOld = await s.api('POST', '/api/profile/change-password/', { ...on(a), token: access, body: { old_password: 'nope-nope-1', new_password: 'Frank-new-pass-1' } });
  t.is(wrongOld.status, 400);
  t.truthy(wrongOld.body.errors.old_password);
  const ok = await s.api('POST', '/api/profile/change-password/', { ...on(a), token: access, body: { old_password: CAROL_A, new_password: 'Frank-new-pass-1' } });
  t.is(ok.status, 200);
  t.is((await s.api('GET', '/api/profile/', { ...on(a), token: access })).status, 401);
  t.is((await login(a, 'frank', CAROL_A)).status, 401);
  t.is((await login(a, 'frank', 'Frank-new-pass-1')).status, 200);

  const owner = await tokens(a, 'owner', OWNER_PASSWORD);
  const linked = await s.api('POST', '/api/profile/change-password/', { ...on(a), token: owner.access, body: { old_password: OWNER_PASSWORD, new_password: 'Other-pass-word-9' } });
  t.is(linked.status, 400);
  t.regex(linked.body.message, /change the password on the platform/);
  t.is((await login(a, 'owner', OWNER_PASSWORD)).status, 200, 'nothing changed');
});

test('public profiles: any signed-in user of the site, public fields only, never another site\'s users', async (t) => {
  const { access } = await tokens(a, 'erin', CAROL_A);
  for (const ref of ['carol', ids.carolA]) {
    const res = await s.api('GET', `/api/users/${ref}/profile/`, { ...on(a), token: access });
    t.is(res.status, 200);
    t.deepEqual(res.body, { uuid: ids.carolA, username: 'carol', first_name: 'First', last_name: 'Last' });
  }
  t.is((await s.api('GET', `/api/users/${ids.carolB}/profile/`, { ...on(a), token: access })).status, 404);
  t.is((await s.api('GET', '/api/users/carol/profile/', on(a))).status, 401);
  t.is((await s.api('GET', '/api/users/carol/profile/', { token: root })).status, 404, 'not a platform route');
});

test('site user administration: admins only, one site\'s users only', async (t) => {
  const admin = (await tokens(a, 'owner', OWNER_PASSWORD)).access;
  const carol = (await tokens(a, 'carol', CAROL_A)).access;
  const list = await s.api('GET', '/api/users/?page_size=100', { ...on(a), token: admin });
  t.is(list.status, 200);
  const names = list.body.results.map((u: { username: string }) => u.username);
  t.true(names.includes('carol') && names.includes('owner'));
  t.false(list.body.results.some((u: { uuid: string }) => u.uuid === ids.carolB));
  t.false(names.includes('root'));
  for (const [method, path] of [['GET', '/api/users/'], ['POST', '/api/users/'], ['GET', '/api/users/erin/'], ['PUT', '/api/users/erin/'], ['DELETE', '/api/users/erin/']]) {
    const res = await s.api(method, path, { ...on(a), token: carol, body: method === 'POST' || method === 'PUT' ? { username: 'x', password: 'Some-pass-word-1' } : undefined });
    t.is(res.status, 403, `${method} ${path}`);
  }
  // The platform alias of /api/cloud/users/ is untouched on the platform host.
  const platform = await s.api('GET', '/api/users/', { token: root });
  t.is(platform.status, 200);
  t.true(platform.body.results.some((u: { username: string }) => u.username === 'root'));

  const created = await s.api('POST', '/api/users/', { ...on(a), token: admin, body: { username: 'gina', email: 'gina@example.com', password: 'Gina-pass-word-1' } });
  t.is(created.status, 201, created.text);
  t.like(created.body, { status: 'success', message: 'User created successfully.', data: { username: 'gina', platform_user_uuid: null } });
  t.is((await login(a, 'gina', 'Gina-pass-word-1')).status, 200);
  t.is((await login(b, 'gina', 'Gina-pass-word-1')).status, 401);
  t.is((await s.api('GET', '/api/users/gina/', { ...on(b), token: (await tokens(b, 'owner', OWNER_PASSWORD)).access })).status, 404);

  const linkedPassword = await s.api('PUT', '/api/users/owner/', { ...on(a), token: admin, body: { password: 'Another-pass-1' } });
  t.is(linkedPassword.status, 400);
  t.truthy(linkedPassword.body.errors.password);
  const updated = await s.api('PUT', `/api/users/${created.body.data.uuid}/`, { ...on(a), token: admin, body: { last_name: 'Gee', is_staff: true } });
  t.is(updated.status, 200);
  t.like(updated.body, { last_name: 'Gee', is_staff: true });
  t.is((await s.api('DELETE', '/api/users/owner/', { ...on(a), token: admin })).status, 422, 'not yourself');
  t.is((await s.api('DELETE', '/api/users/gina/', { ...on(a), token: admin })).status, 200);
  t.is((await login(a, 'gina', 'Gina-pass-word-1')).status, 401);
  t.is((await s.api('GET', '/api/users/gina/', { ...on(a), token: admin })).body.is_deleted, true);
});

test('site staff administer ordinary site users, not superusers, and give no admin flags', async (t) => {
  await sql(`INSERT INTO "${a.schema}".users (uuid, username, password, is_staff) VALUES (gen_random_uuid(), 'stan', ?, true)`, [await hashPassword(CAROL_A)]);
  await seedSiteUser(a, { username: 'tim', password: CAROL_A });
  const stan = (await tokens(a, 'stan', CAROL_A)).access;
  const as = (method: string, path: string, body?: unknown) => s.api(method, path, { ...on(a), token: stan, body });
  t.is((await as('GET', '/api/users/owner/')).status, 200, 'staff see superusers');
  t.is((await as('PUT', '/api/users/owner/', { first_name: 'Nope' })).status, 403);
  t.is((await as('DELETE', '/api/users/owner/')).status, 403);
  t.is((await as('PUT', '/api/users/tim/', { is_staff: true })).status, 403);
  t.is((await as('POST', '/api/users/', { username: 'sup', password: 'Some-pass-word-1', is_superuser: true })).status, 403);
  t.is((await as('POST', '/api/users/', { username: 'stf', password: 'Some-pass-word-1', is_staff: true })).status, 403);
  const renamed = await as('PUT', '/api/users/tim/', { first_name: 'Timothy' });
  t.is(renamed.status, 200, renamed.text);
  t.like(renamed.body, { first_name: 'Timothy', is_staff: false });
  t.like((await as('GET', '/api/users/owner/')).body, { first_name: 'First', is_superuser: true });
});

test('a site superuser\'s actor reaches nothing on the platform nor in another site (services called directly)', async (t) => {
  const [row] = await sql(`SELECT uuid FROM "${a.schema}".users WHERE username = 'owner'`);
  const actor: UserActor = { kind: 'user', uuid: row.uuid, username: 'owner', is_superuser: true, is_staff: true, tenant: a.schema };
  const em = () => s.handle.db.orm.em.fork();
  const onPlatform = () => makeContext(em(), actor, null);
  const denied = { code: 'PERMISSION_DENIED' } as const;
  await t.throwsAsync(listUsers(onPlatform(), {}), denied);
  await t.throwsAsync(createOrganization(onPlatform(), { name: 'Taken over' }, { organizationsPerUser: 0 }), denied);
  t.is((await listOrganizations(onPlatform(), {})).count, 0);
  for (const call of [listApps, listSecrets, listSiteUsers] as ((ctx: ReturnType<typeof makeContext>, q: unknown) => Promise<unknown>)[]) {
    await t.throwsAsync(call(makeContext(em(), actor, b.schema), {}), denied, call.name);
    await t.notThrowsAsync(call(makeContext(em(), actor, a.schema), {}), `${call.name} in its own site`);
  }
});

test('the OpenAPI document shows site routes that share a platform path under /sites/{schema_name}', async (t) => {
  const doc = (await s.api('GET', '/api/schema/')).body;
  t.truthy(doc.paths['/api/users/'].get);
  t.is(doc.paths['/sites/{schema_name}/api/users/'].get.operationId, 'site_users_list');
  t.truthy(doc.paths['/api/secrets/{key}/history/'].get);
});
