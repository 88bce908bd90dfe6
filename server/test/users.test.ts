import fs from 'node:fs';
import test from 'ava';
import { ADMIN, startTestServer, type TestServer } from './helpers.ts';

let s: TestServer;
let root: string;
test.before(async () => {
  s = await startTestServer();
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

let n = 0;
async function makeUser(extra: Record<string, unknown> = {}) {
  n++;
  const body = { username: `user${n}-${Date.now()}`, email: `u${n}-${Date.now()}@example.com`, password: 'correct-horse-1', ...extra };
  const res = await s.api('POST', '/api/cloud/users/', { token: root, body });
  if (res.status !== 201) throw new Error(`create failed: ${res.text}`);
  const tokens = await s.login(body.username as string, body.password as string);
  return { user: res.body.data, ...tokens, password: body.password as string };
}

test('create returns 201 in the {status, message, data} envelope and never exposes the password', async (t) => {
  const res = await s.api('POST', '/api/cloud/users/', {
    token: root,
    body: { username: 'alice', email: 'alice@example.com', password: 'wonderland-1', first_name: 'Alice', last_name: 'Liddell' },
  });
  t.is(res.status, 201);
  t.is(res.body.status, 'success');
  t.is(typeof res.body.message, 'string');
  t.like(res.body.data, { username: 'alice', email: 'alice@example.com', first_name: 'Alice', is_active: true, is_deleted: false, is_staff: false });
  t.false('password' in res.body.data);
  t.false(res.text.includes('wonderland'));
  const byName = await s.api('GET', '/api/cloud/users/alice/', { token: root });
  const byUuid = await s.api('GET', `/api/cloud/users/${res.body.data.uuid}/`, { token: root });
  t.is(byName.status, 200);
  t.deepEqual(byName.body, byUuid.body);
  // The overview's alias names the same resource.
  t.deepEqual((await s.api('GET', '/api/users/alice/', { token: root })).body, byName.body);
});

test('usernames are generated from the e-mail with -2, -3 on collision, also under concurrent creates', async (t) => {
  const results = await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      s.api('POST', '/api/cloud/users/', { token: root, body: { email: `carol@host${i}.example`, password: 'concurrent-1' } }),
    ),
  );
  t.true(results.every((r) => r.status === 201), results.map((r) => r.text).join('\n'));
  const names = results.map((r) => r.body.data.username).sort();
  t.deepEqual(names, ['carol', 'carol-2', 'carol-3', 'carol-4', 'carol-5', 'carol-6']);
});

test('duplicate username or e-mail gives 400 on that field and creates nothing', async (t) => {
  await s.api('POST', '/api/cloud/users/', { token: root, body: { username: 'dup', email: 'dup@example.com', password: 'duplicate-1' } });
  const before = (await s.api('GET', '/api/cloud/users/?search=dup', { token: root })).body.count;
  const sameName = await s.api('POST', '/api/cloud/users/', { token: root, body: { username: 'DUP', email: 'other@example.com', password: 'duplicate-1' } });
  t.is(sameName.status, 400);
  t.deepEqual(sameName.body.errors, { username: ['A user with that username already exists.'] });
  const sameMail = await s.api('POST', '/api/cloud/users/', { token: root, body: { username: 'dup2', email: 'DUP@example.com', password: 'duplicate-1' } });
  t.is(sameMail.status, 400);
  t.truthy(sameMail.body.errors.email);
  t.is((await s.api('GET', '/api/cloud/users/?search=dup', { token: root })).body.count, before);
});

test('bad input names the field and changes nothing', async (t) => {
  const cases: [unknown, string][] = [
    [{ username: 'x1', email: 'not-an-email', password: 'long-enough-1' }, 'email'],
    [{ username: 'x2', password: '123' }, 'password'],
    [{ username: 'x3', password: '12345678901' }, 'password'],
    [{ username: 'bad name!', password: 'long-enough-1' }, 'username'],
    [{ username: 'x4', password: 'long-enough-1', is_staff: 'yes' }, 'is_staff'],
    [{ username: 'x5', password: 'long-enough-1', role: 'admin' }, 'role'],
    [{ username: 'x6' }, 'password'],
    [{ username: "x7'; DROP TABLE users; --", password: 'long-enough-1' }, 'username'],
  ];
  for (const [body, field] of cases) {
    const res = await s.api('POST', '/api/cloud/users/', { token: root, body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.code, 'VALIDATION_ERROR');
    t.truthy(res.body.errors[field], `${JSON.stringify(body)} → ${res.text}`);
  }
  for (const name of ['x1', 'x2', 'x3', 'x4', 'x5', 'x6']) {
    t.is((await s.api('GET', `/api/cloud/users/${name}/`, { token: root })).status, 404, name);
  }
});

test('list: search, filters, ordering; SQL and wildcard text in parameters is inert', async (t) => {
  await makeUser({ username: 'zed-search', first_name: 'Zebulon' });
  const found = await s.api('GET', '/api/cloud/users/?search=zebu', { token: root });
  t.is(found.status, 200);
  t.deepEqual(found.body.results.map((u: { username: string }) => u.username), ['zed-search']);
  for (const search of ["' OR '1'='1", '%', '_', '\\', "zed'; DELETE FROM users; --"]) {
    const res = await s.api('GET', `/api/cloud/users/?search=${encodeURIComponent(search)}`, { token: root });
    t.is(res.status, 200, search);
    t.is(res.body.count, 0, search);
  }
  const bad = await s.api('GET', '/api/cloud/users/?ordering=password', { token: root });
  t.is(bad.status, 400);
  t.truthy(bad.body.errors.ordering);
  const ordered = await s.api('GET', '/api/cloud/users/?ordering=-username&page_size=100', { token: root });
  const names = ordered.body.results.map((u: { username: string }) => u.username);
  t.deepEqual(names, [...names].sort().reverse());
  t.true((await s.api('GET', '/api/cloud/users/zed-search/', { token: root })).status === 200);
});

test('ordinary users see only themselves and cannot create, change flags or delete', async (t) => {
  const { user, access } = await makeUser();
  const list = await s.api('GET', '/api/cloud/users/', { token: access });
  t.is(list.status, 200);
  t.deepEqual(list.body.results.map((u: { uuid: string }) => u.uuid), [user.uuid]);
  t.is((await s.api('GET', `/api/cloud/users/${ADMIN.username}/`, { token: access })).status, 404);
  const create = await s.api('POST', '/api/cloud/users/', { token: access, body: { username: 'sneaky', password: 'sneaky-pass-1' } });
  t.is(create.status, 403);
  t.is(create.body.detail, 'You do not have permission to perform this action.');
  t.is(create.body.code, 'PERMISSION_DENIED');
  const promote = await s.api('PUT', `/api/cloud/users/${user.username}/`, { token: access, body: { is_superuser: true } });
  t.is(promote.status, 403);
  t.false((await s.api('GET', `/api/cloud/users/${user.username}/`, { token: root })).body.is_superuser);
  t.is((await s.api('DELETE', `/api/cloud/users/${user.username}/`, { token: access })).status, 403);
});

test('staff manage ordinary users but not superusers or admin flags', async (t) => {
  const staff = await makeUser({ is_staff: true });
  const plain = await makeUser();
  const rename = await s.api('PUT', `/api/cloud/users/${plain.user.username}/`, { token: staff.access, body: { first_name: 'Renamed' } });
  t.is(rename.status, 200);
  t.is(rename.body.first_name, 'Renamed');
  t.is((await s.api('PUT', `/api/cloud/users/${ADMIN.username}/`, { token: staff.access, body: { first_name: 'x' } })).status, 403);
  t.is((await s.api('PUT', `/api/cloud/users/${plain.user.username}/`, { token: staff.access, body: { is_staff: true } })).status, 403);
  t.is((await s.api('POST', '/api/cloud/users/', { token: staff.access, body: { username: 'su', password: 'superuser-1', is_superuser: true } })).status, 403);
});

test('PUT updates fields; a password set by an admin revokes the old tokens', async (t) => {
  const u = await makeUser();
  const res = await s.api('PUT', `/api/cloud/users/${u.user.uuid}/`, { token: root, body: { last_name: 'Updated', email: 'updated@example.com' } });
  t.is(res.status, 200);
  t.like(res.body, { last_name: 'Updated', email: 'updated@example.com', username: u.user.username });
  t.is((await s.api('PUT', `/api/cloud/users/${u.user.uuid}/`, { token: root, body: { password: 'brand-new-pass-1' } })).status, 200);
  t.is((await s.api('GET', '/api/profile/', { token: u.access })).status, 401);
  t.is((await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh: u.refresh } })).status, 401);
  t.truthy(await s.login(u.user.username, 'brand-new-pass-1'));
});

test('DELETE is soft: flags set, login and refresh refused, hidden from the default list', async (t) => {
  const u = await makeUser();
  const del = await s.api('DELETE', `/api/cloud/users/${u.user.username}/`, { token: root });
  t.is(del.status, 200);
  t.is(del.body.status, 'success');
  const after = await s.api('GET', `/api/cloud/users/${u.user.username}/`, { token: root });
  t.is(after.status, 200);
  t.true(after.body.is_deleted);
  t.false(after.body.is_active);
  t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: u.user.username, password: u.password } })).status, 401);
  t.is((await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh: u.refresh } })).status, 401);
  t.is((await s.api('GET', '/api/profile/', { token: u.access })).status, 401);
  const list = await s.api('GET', `/api/cloud/users/?search=${u.user.username}`, { token: root });
  t.is(list.body.count, 0);
  const deleted = await s.api('GET', `/api/cloud/users/?search=${u.user.username}&is_deleted=true`, { token: root });
  t.is(deleted.body.count, 1);
  t.is((await s.api('DELETE', '/api/cloud/users/no-such-user/', { token: root })).status, 404);
});

test('profile: GET and PUT the current user; unknown fields and flags are refused', async (t) => {
  const u = await makeUser();
  const get = await s.api('GET', '/api/profile/', { token: u.access });
  t.is(get.status, 200);
  t.is(get.body.uuid, u.user.uuid);
  const put = await s.api('PUT', '/api/profile/', { token: u.access, body: { first_name: 'Profiled' } });
  t.is(put.status, 200);
  t.is(put.body.first_name, 'Profiled');
  const flag = await s.api('PUT', '/api/profile/', { token: u.access, body: { is_superuser: true } });
  t.is(flag.status, 400);
  t.deepEqual(flag.body.errors, { is_superuser: ['This field is read-only and cannot be changed.'] });
  t.false((await s.api('GET', '/api/profile/', { token: u.access })).body.is_superuser);
});

test('change-password needs the old password and revokes every earlier token', async (t) => {
  const u = await makeUser();
  const wrong = await s.api('POST', '/api/profile/change-password/', { token: u.access, body: { old_password: 'nope-nope-1', new_password: 'next-password-1' } });
  t.is(wrong.status, 400);
  t.truthy(wrong.body.errors.old_password);
  const weak = await s.api('POST', '/api/profile/change-password/', { token: u.access, body: { old_password: u.password, new_password: '1234' } });
  t.is(weak.status, 400);
  t.truthy(weak.body.errors.new_password);
  const ok = await s.api('POST', '/api/profile/change-password/', { token: u.access, body: { old_password: u.password, new_password: 'next-password-1' } });
  t.is(ok.status, 200);
  t.is((await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh: u.refresh } })).status, 401);
  t.is((await s.api('GET', '/api/profile/', { token: u.access })).status, 401);
  t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: u.user.username, password: u.password } })).status, 401);
  t.truthy(await s.login(u.user.username, 'next-password-1'));
});

test('the bootstrap superuser exists once, with the configured credentials', async (t) => {
  const res = await s.api('GET', `/api/cloud/users/?search=${ADMIN.username}&is_active=all`, { token: root });
  const roots = res.body.results.filter((u: { is_superuser: boolean }) => u.is_superuser);
  t.is(roots.length, 1);
  t.like(roots[0], { username: ADMIN.username, email: ADMIN.email, is_staff: true });
});

test('the fixture users can be created and sign in', async (t) => {
  const fixtures = JSON.parse(fs.readFileSync(new URL('../../fixtures/users.json', import.meta.url), 'utf8')) as Record<string, unknown>[];
  for (const u of fixtures) {
    const res = await s.api('POST', '/api/cloud/users/', { token: root, body: u });
    t.is(res.status, 201, res.text);
    t.is(res.body.data.is_staff, u.is_staff === true);
    t.truthy(await s.login(u.username as string, u.password as string));
  }
});

test('quotes, wildcards and SQL fragments in the path parameter reach nobody', async (t) => {
  for (const ref of ["' OR '1'='1", '%', '_oot', 'r%', "root'--", '00000000-0000-0000-0000-000000000000']) {
    const res = await s.api('GET', `/api/cloud/users/${encodeURIComponent(ref)}/`, { token: root });
    t.is(res.status, 404, ref);
    t.is(res.body.code, 'NOT_FOUND');
    t.is((await s.api('DELETE', `/api/cloud/users/${encodeURIComponent(ref)}/`, { token: root })).status, 404, ref);
  }
  t.is((await s.api('GET', `/api/cloud/users/${ADMIN.username}/`, { token: root })).status, 200);
});

test('organization_slug narrows the list to that organization\'s members', async (t) => {
  const member = await makeUser();
  const outsider = await makeUser();
  const org = await s.api('POST', '/api/cloud/organizations/', { token: root, body: { name: `Filter Org ${Date.now()}` } });
  t.is(org.status, 201, org.text);
  const add = await s.api('POST', `/api/cloud/organizations/${org.body.data.slug}/members/`, { token: root, body: { user_slug: member.user.username } });
  t.is(add.status, 201, add.text);
  const res = await s.api('GET', `/api/cloud/users/?organization_slug=${org.body.data.slug}&page_size=100`, { token: root });
  t.is(res.status, 200);
  const names = res.body.results.map((u: { username: string }) => u.username);
  t.true(names.includes(member.user.username));
  t.true(names.includes(ADMIN.username)); // the creator is the owner
  t.false(names.includes(outsider.user.username));
  t.is((await s.api('GET', "/api/cloud/users/?organization_slug=no-such-org'--", { token: root })).body.count, 0);
});
