// Members: list (defaults and overrides, filters, ordering, pagination), add, get, PUT
// (admin flag, groups, site grants replaced; bad input changes nothing), remove, make/remove
// admin (the last admin kept, also under a race), and who may do what.
import test from 'ava';
import { PERMISSION_DENIED_DETAIL } from '../../shared/errors.ts';
import { DIRECT_ADD_REFUSED } from '../../shared/organizations/member.service.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { addMember, db, makeOrg, makeUser, rows, type TestUser } from './org-helpers.ts';

let s: TestServer;
let root: string;
test.before(async () => {
  s = await startTestServer();
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

const MEMBER_KEYS = ['uuid', 'username', 'email', 'first_name', 'last_name', 'is_active', 'is_admin', 'is_owner', 'groups', 'sites'];
const base = (org: string) => `/api/cloud/organizations/${org}/members/`;

/** An organization owned by a fresh user, with a site of its own (moved into it). */
async function orgWithSite(name: string): Promise<{ owner: TestUser; org: { uuid: string; slug: string }; site: TestSite }> {
  const owner = await makeUser(s, root, 'owner');
  const org = await makeOrg(s, owner.access, name);
  const site = await createTestSite(db(s), { name: `${name} Site` });
  await db(s).execute('UPDATE public.sites SET organization_uuid = ? WHERE uuid = ?', [org.uuid, site.uuid]);
  return { owner, org, site };
}

test('add: platform operators only (everyone else invites); 201 envelope with the member body; by username or UUID; unknown, inactive or duplicate users → 400, nothing added', async (t) => {
  const { owner, org } = await orgWithSite('Adders');
  const alice = await makeUser(s, root, 'alice', { first_name: 'Alice', last_name: 'Liddell' });
  const bob = await makeUser(s, root, 'bob');
  // The owner cannot attach an existing user without that user's consent.
  const refused = await s.api('POST', base(org.slug), { token: owner.access, body: { user_slug: alice.username } });
  t.is(refused.status, 403);
  t.is(refused.body.message, DIRECT_ADD_REFUSED);
  t.is((await rows(s, 'SELECT 1 FROM public.organization_members WHERE organization_uuid = ? AND user_uuid = ?', [org.uuid, alice.uuid])).length, 0);
  const res = await s.api('POST', base(org.slug), { token: root, body: { user_slug: alice.username } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body), ['status', 'message', 'data']);
  t.is(res.body.message, 'Member added successfully.');
  t.deepEqual(Object.keys(res.body.data), MEMBER_KEYS);
  t.like(res.body.data, { username: alice.username, email: `${alice.username}@example.com`, first_name: 'Alice', last_name: 'Liddell', is_active: true, is_admin: false, is_owner: false });
  t.deepEqual(res.body.data.groups, []);
  t.deepEqual(res.body.data.sites, []);
  t.is((await s.api('POST', base(org.slug), { token: root, body: { user_slug: bob.uuid.toUpperCase() } })).status, 201);
  const inactive = await makeUser(s, root, 'inactive');
  await s.api('PUT', `/api/cloud/users/${inactive.username}/`, { token: root, body: { is_active: false } });
  const before = (await s.api('GET', `${base(org.slug)}?user__is_active=all`, { token: owner.access })).body.count;
  const cases: [unknown, string, string][] = [
    [{ user_slug: 'nobody-at-all' }, 'user_slug', 'No active user with that username or UUID.'],
    [{ user_slug: crypto.randomUUID() }, 'user_slug', 'No active user with that username or UUID.'],
    [{ user_slug: inactive.username }, 'user_slug', 'No active user with that username or UUID.'],
    [{ user_slug: alice.username.toUpperCase() }, 'user_slug', 'This user is already a member of the organization.'],
    [{ user_slug: '' }, 'user_slug', 'This field may not be blank.'],
    [{}, 'user_slug', 'This field is required.'],
    [{ user_slug: alice.username, is_admin: true }, 'is_admin', 'Unknown field.'],
  ];
  for (const [body, field, message] of cases) {
    const bad = await s.api('POST', base(org.slug), { token: root, body });
    t.is(bad.status, 400, JSON.stringify(body));
    t.deepEqual(bad.body.errors, { [field]: [message] }, JSON.stringify(body));
  }
  t.is((await s.api('GET', `${base(org.slug)}?user__is_active=all`, { token: owner.access })).body.count, before);
});

test('list: active, undeleted users by default; explicit values override; is_admin, search, ordering, pagination', async (t) => {
  const { owner, org } = await orgWithSite('Listers');
  const users: TestUser[] = [];
  for (const [prefix, extra] of [['zoe', { first_name: 'Zoe' }], ['adam', { last_name: 'Smithson' }], ['gone', {}], ['off', {}]] as const) {
    const u = await makeUser(s, root, prefix, extra);
    await addMember(s, root, org.slug, u.username);
    users.push(u);
  }
  const [zoe, adam, gone, off] = users;
  await s.api('DELETE', `/api/cloud/users/${gone.username}/`, { token: root });
  await s.api('PUT', `/api/cloud/users/${off.username}/`, { token: root, body: { is_active: false } });
  await s.api('POST', `${base(org.slug)}${adam.username}/make_admin/`, { token: owner.access });
  const get = (qs = '') => s.api('GET', `${base(org.slug)}?${qs}`, { token: owner.access });
  const names = (r: { body: { results: { username: string }[] } }) => r.body.results.map((m) => m.username);
  t.deepEqual(names(await get()), [owner.username, zoe.username, adam.username]);
  t.deepEqual(names(await get('user__is_active=false')), [off.username]);
  t.deepEqual(names(await get('user__is_deleted=true&user__is_active=all')), [gone.username]);
  t.deepEqual(names(await get('user__is_active=*&user__is_deleted=all')), [owner.username, zoe.username, adam.username, gone.username, off.username]);
  t.deepEqual(names(await get('is_admin=true')), [owner.username, adam.username]);
  t.deepEqual(names(await get('is_admin=0')), [zoe.username]);
  t.deepEqual(names(await get('search=smithSON')), [adam.username]);
  t.deepEqual(names(await get('search=zoe')), [zoe.username]);
  t.deepEqual(names(await get(`search=${encodeURIComponent(`${zoe.username}@example`)}`)), [zoe.username]);
  const sorted = [owner.username, zoe.username, adam.username].sort();
  t.deepEqual(names(await get('ordering=user__username')), sorted);
  t.deepEqual(names(await get('ordering=-user__email')), [...sorted].reverse());
  t.deepEqual(names(await get('ordering=-created')), [adam.username, zoe.username, owner.username]);
  t.is((await get('ordering=password')).status, 400);
  const page = await get('page_size=2');
  t.like(page.body, { count: 3, previous: null });
  t.is(page.body.next, `${s.url}${base(org.slug)}?page_size=2&page=2`);
  t.deepEqual(names(await get('page_size=2&page=2')), [adam.username]);
  t.deepEqual((await s.api('GET', `/api/organizations/${org.slug}/members/`, { token: owner.access })).body, (await get()).body);
});

test('get by username, user UUID or membership UUID; unknown → 404', async (t) => {
  const { owner, org } = await orgWithSite('Getters');
  const u = await makeUser(s, root);
  await addMember(s, root, org.slug, u.username);
  const res = await s.api('GET', `${base(org.slug)}${u.username}/`, { token: owner.access });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body), MEMBER_KEYS);
  t.deepEqual((await s.api('GET', `${base(org.slug)}${u.uuid}/`, { token: owner.access })).body, res.body);
  t.deepEqual((await s.api('GET', `${base(org.slug)}${res.body.uuid}/`, { token: owner.access })).body, res.body);
  t.deepEqual((await s.api('GET', `${base(org.slug)}${u.username.toUpperCase()}/`, { token: owner.access })).body, res.body);
  const missing = await s.api('GET', `${base(org.slug)}no-such-member/`, { token: owner.access });
  t.is(missing.status, 404);
  t.is(missing.body.message, 'Member not found.');
  t.is((await s.api('GET', `${base(org.slug)}${u.username}/`, { token: u.access })).status, 200, 'members see each other');
});

test('PUT replaces admin flag, groups and site grants in one go; read back', async (t) => {
  const { owner, org, site } = await orgWithSite('Putters');
  const u = await makeUser(s, root);
  await addMember(s, root, org.slug, u.username);
  const g1 = (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Put Group B' } })).body.data;
  const g2 = (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Put Group A' } })).body.data;
  const url = `${base(org.slug)}${u.username}/`;
  const res = await s.api('PUT', url, {
    token: owner.access,
    body: { is_admin: true, groups: [g1.id, g2.id], site: [{ uuid: site.uuid, permissions: ['access_site', 'view_site', 'view_site'] }] },
  });
  t.is(res.status, 200, res.text);
  t.like(res.body, { username: u.username, is_admin: true });
  t.deepEqual(res.body.groups, [{ id: g2.id, name: 'Put Group A' }, { id: g1.id, name: 'Put Group B' }]);
  t.deepEqual(res.body.sites, [{ uuid: site.uuid, name: 'Putters Site', schema_name: site.schema, permissions: ['view_site', 'access_site'] }]);
  t.deepEqual((await s.api('GET', url, { token: owner.access })).body, res.body);
  const again = await s.api('PUT', url, { token: owner.access, body: { is_admin: false, groups: [g1.id], site: [] } });
  t.is(again.status, 200);
  t.like(again.body, { is_admin: false, groups: [{ id: g1.id, name: 'Put Group B' }], sites: [] });
  // A field left out is unchanged.
  const partial = await s.api('PUT', url, { token: owner.access, body: { site: [{ uuid: site.uuid, permissions: ['manage_site'] }] } });
  t.like(partial.body, { is_admin: false, groups: [{ id: g1.id }] });
  t.deepEqual(partial.body.sites[0].permissions, ['manage_site']);
  const grants = await rows(s, `SELECT 1 FROM public.object_permissions WHERE user_uuid = ? AND object_type = 'site'`, [u.uuid]);
  t.is(grants.length, 1);
});

test('PUT with bad groups, sites or permissions → 400 naming the field; nothing changed', async (t) => {
  const { owner, org, site } = await orgWithSite('Bad Putters');
  const foreign = await createTestSite(db(s));
  const u = await makeUser(s, root);
  await addMember(s, root, org.slug, u.username);
  const g = (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Bad Put Group' } })).body.data;
  const url = `${base(org.slug)}${u.username}/`;
  await s.api('PUT', url, { token: owner.access, body: { groups: [g.id], site: [{ uuid: site.uuid, permissions: ['view_site'] }] } });
  const before = (await s.api('GET', url, { token: owner.access })).body;
  const cases: [unknown, Record<string, string[]>][] = [
    [{ groups: [g.id, 999999] }, { groups: ['Unknown group id: 999999.'] }],
    [{ is_admin: true, site: [{ uuid: foreign.uuid, permissions: ['view_site'] }] }, { 'site.0.uuid': ['Not a site of this organization.'] }],
    [
      { groups: [], site: [{ uuid: site.uuid, permissions: ['view_site', 'fly'] }, { uuid: site.uuid, permissions: ['view_organization'] }] },
      {
        'site.0.permissions': ['Unknown site permission: fly. Use: view_site, change_site, delete_site, access_site, manage_site, manage_site_users, admin_site.'],
        'site.1.permissions': ['Unknown site permission: view_organization. Use: view_site, change_site, delete_site, access_site, manage_site, manage_site_users, admin_site.'],
      },
    ],
    [{ site: [{ uuid: 'not-a-uuid', permissions: [] }] }, { 'site.0.uuid': ['Must be a valid UUID.'] }],
    [{ groups: ['one'] }, { 'groups.0': ['A valid integer is required.'] }],
    [{ is_admin: 'yes' }, { is_admin: ['Must be a valid boolean.'] }],
    [{ is_owner: true }, { is_owner: ['This field is read-only and cannot be changed.'] }],
  ];
  for (const [body, errors] of cases) {
    const res = await s.api('PUT', url, { token: owner.access, body });
    t.is(res.status, 400, JSON.stringify(body));
    t.deepEqual(res.body.errors, errors, JSON.stringify(body));
  }
  t.deepEqual((await s.api('GET', url, { token: owner.access })).body, before);
});

test('DELETE: removes the member and their grants; the owner stays; the removed member loses access', async (t) => {
  const { owner, org, site } = await orgWithSite('Removers');
  const u = await makeUser(s, root);
  await addMember(s, root, org.slug, u.username);
  await s.api('PUT', `${base(org.slug)}${u.username}/`, { token: owner.access, body: { site: [{ uuid: site.uuid, permissions: ['view_site'] }] } });
  await db(s).execute(`INSERT INTO public.object_permissions (user_uuid, permission_id, object_type, object_uuid) SELECT ?, id, 'organization', ? FROM public.permissions WHERE codename = 'invite_members'`, [
    u.uuid,
    org.uuid,
  ]);
  const ownerDelete = await s.api('DELETE', `${base(org.slug)}${owner.username}/`, { token: owner.access });
  t.is(ownerDelete.status, 400);
  t.is(ownerDelete.body.message, 'The owner cannot be removed from the organization.');
  const res = await s.api('DELETE', `${base(org.slug)}${u.username}/`, { token: owner.access });
  t.is(res.status, 200);
  t.deepEqual(res.body, { status: 'success', message: 'Member removed.' });
  t.is((await s.api('GET', `${base(org.slug)}${u.username}/`, { token: owner.access })).status, 404);
  t.deepEqual(await rows(s, 'SELECT 1 FROM public.object_permissions WHERE user_uuid = ?', [u.uuid]), []);
  t.is((await s.api('GET', `/api/cloud/organizations/${org.slug}/`, { token: u.access })).status, 404);
  t.is((await s.api('GET', `${base(org.slug)}${owner.username}/`, { token: owner.access })).status, 200);
});

test('make_admin / remove_admin; the last admin is kept', async (t) => {
  const { owner, org } = await orgWithSite('Admins');
  const u = await makeUser(s, root);
  await addMember(s, root, org.slug, u.username);
  const make = await s.api('POST', `${base(org.slug)}${u.username}/make_admin/`, { token: owner.access });
  t.deepEqual(make.body, { status: 'success', message: 'The member is now an admin.' });
  t.true((await s.api('GET', `${base(org.slug)}${u.username}/`, { token: owner.access })).body.is_admin);
  // The new admin manages members now, and may take the owner's admin flag (the owner keeps full control).
  const demoteOwner = await s.api('POST', `${base(org.slug)}${owner.username}/remove_admin/`, { token: u.access });
  t.deepEqual(demoteOwner.body, { status: 'success', message: 'The member is no longer an admin.' });
  const last = await s.api('POST', `${base(org.slug)}${u.username}/remove_admin/`, { token: owner.access });
  t.is(last.status, 400);
  t.like(last.body, { code: 'VALIDATION_ERROR', message: 'This member is the last admin of the organization: make another member an admin first.' });
  const viaPut = await s.api('PUT', `${base(org.slug)}${u.username}/`, { token: owner.access, body: { is_admin: false } });
  t.is(viaPut.status, 400);
  t.truthy(viaPut.body.errors.is_admin);
  t.is((await s.api('DELETE', `${base(org.slug)}${u.username}/`, { token: owner.access })).status, 400, 'removing the last admin is refused too');
  t.true((await s.api('GET', `${base(org.slug)}${u.username}/`, { token: owner.access })).body.is_admin);
  t.deepEqual((await s.api('GET', `/api/cloud/organizations/${org.slug}/privileges/`, { token: owner.access })).body.permissions.length, 5);
});

test('remove_admin under a race: of two admins demoted at once, exactly one succeeds', async (t) => {
  for (let round = 0; round < 5; round++) {
    const { owner, org } = await orgWithSite(`Racers ${round}`);
    const u = await makeUser(s, root);
    await addMember(s, root, org.slug, u.username);
    await s.api('POST', `${base(org.slug)}${u.username}/make_admin/`, { token: owner.access });
    const results = await Promise.all([
      s.api('POST', `${base(org.slug)}${u.username}/remove_admin/`, { token: owner.access }),
      s.api('POST', `${base(org.slug)}${owner.username}/remove_admin/`, { token: owner.access }),
    ]);
    t.deepEqual(results.map((r) => r.status).sort(), [200, 400], results.map((r) => r.text).join('\n'));
    const admins = await rows(s, 'SELECT 1 FROM public.organization_members WHERE organization_uuid = ? AND is_admin', [org.uuid]);
    t.is(admins.length, 1);
  }
});

test('members without manage_organization get 403 with the exact detail; strangers 404; nothing changes', async (t) => {
  const { owner, org } = await orgWithSite('Guards');
  const member = await makeUser(s, root);
  const stranger = await makeUser(s, root);
  await addMember(s, root, org.slug, member.username);
  t.is((await s.api('GET', base(org.slug), { token: member.access })).status, 200);
  const calls: [string, string, unknown][] = [
    ['POST', base(org.slug), { user_slug: stranger.username }],
    ['PUT', `${base(org.slug)}${member.username}/`, { is_admin: true }],
    ['DELETE', `${base(org.slug)}${owner.username}/`, undefined],
    ['POST', `${base(org.slug)}${member.username}/make_admin/`, undefined],
    ['POST', `${base(org.slug)}${owner.username}/remove_admin/`, undefined],
  ];
  for (const [method, path, body] of calls) {
    const res = await s.api(method, path, { token: member.access, body });
    t.is(res.status, 403, `${method} ${path}`);
    t.like(res.body, { code: 'PERMISSION_DENIED', detail: PERMISSION_DENIED_DETAIL });
    t.is((await s.api(method, path, { token: stranger.access, body })).status, 404, `${method} ${path}`);
  }
  t.is((await s.api('GET', base(org.slug), { token: stranger.access })).status, 404);
  const list = await s.api('GET', base(org.slug), { token: owner.access });
  t.deepEqual(list.body.results.map((m: { username: string; is_admin: boolean }) => [m.username, m.is_admin]), [
    [owner.username, true],
    [member.username, false],
  ]);
  // A superuser manages any organization.
  t.is((await s.api('POST', base(org.slug), { token: root, body: { user_slug: stranger.username } })).status, 201);
});

test('groups are global: an admin assigns only groups whose every permission they hold here, never one with grants in another organization', async (t) => {
  const { owner, org } = await orgWithSite('Escalation');
  const admin = await makeUser(s, root, 'escadmin');
  const target = await makeUser(s, root, 'esctarget');
  for (const u of [admin, target]) await addMember(s, root, org.slug, u.username);
  await s.api('POST', `${base(org.slug)}${admin.username}/make_admin/`, { token: owner.access });
  const group = async (name: string, permissions: string[]) => (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name, permissions } })).body.data.id as number;
  const deleters = await group(`Deleters ${org.slug}`, ['delete_organization']);
  const managers = await group(`Managers ${org.slug}`, ['manage_organization', 'view_site']);
  const elsewhere = await group(`Elsewhere ${org.slug}`, []);
  const other = await makeOrg(s, (await makeUser(s, root, 'otherowner')).access, 'Other Org');
  await rows(s, `INSERT INTO public.object_permissions (group_id, permission_id, object_type, object_uuid) SELECT ?, id, 'organization', ? FROM public.permissions WHERE codename = 'delete_organization'`, [elsewhere, other.uuid]);
  const put = (token: string, groups: unknown[]) => s.api('PUT', `${base(org.slug)}${target.username}/`, { token, body: { groups } });
  const groupsOf = async () => (await rows<{ group_id: number }>(s, 'SELECT group_id FROM public.member_groups mg JOIN public.organization_members m ON m.uuid = mg.member_uuid WHERE m.user_uuid = ? AND m.organization_uuid = ?', [target.uuid, org.uuid])).map((r) => r.group_id);

  const denied = await put(admin.access, [deleters]);
  t.is(denied.status, 403);
  t.regex(denied.body.message, /delete_organization \(group "Deleters/);
  const beyond = await put(owner.access, [elsewhere]);
  t.is(beyond.status, 403, 'not even the owner: the group reaches another organization');
  t.regex(beyond.body.message, /grants outside this organization/);
  t.deepEqual(await groupsOf(), []);
  t.is((await put(admin.access, [managers])).status, 200);
  // The owner (who holds delete_organization) may hand out Deleters; the admin may then send the member back unchanged.
  t.is((await put(owner.access, [managers, deleters])).status, 200);
  const got = (await s.api('GET', `${base(org.slug)}${target.username}/`, { token: admin.access })).body;
  t.deepEqual(got.groups.map((g: { id: number }) => g.id).sort(), [deleters, managers].sort());
  t.is((await s.api('PUT', `${base(org.slug)}${target.username}/`, { token: admin.access, body: got })).status, 200);
  t.is((await put(admin.access, [managers])).status, 200, 'taking a group away needs no hold on it');
  t.deepEqual(await groupsOf(), [managers]);
});

test('the admin flag and site grants: only by someone who holds them', async (t) => {
  const { owner, org, site } = await orgWithSite('Flag');
  const manager = await makeUser(s, root, 'flagmgr');
  const target = await makeUser(s, root, 'flagtarget');
  for (const u of [manager, target]) await addMember(s, root, org.slug, u.username);
  // manage_organization by a direct grant, not an admin: may manage members, not make admins.
  await rows(s, `INSERT INTO public.object_permissions (user_uuid, permission_id, object_type, object_uuid) SELECT ?, id, 'organization', ? FROM public.permissions WHERE codename = 'manage_organization'`, [manager.uuid, org.uuid]);
  for (const [method, path, body] of [
    ['PUT', `${base(org.slug)}${target.username}/`, { is_admin: true }],
    ['POST', `${base(org.slug)}${target.username}/make_admin/`, undefined],
    ['POST', `${base(org.slug)}${manager.username}/make_admin/`, undefined],
    ['PUT', `${base(org.slug)}${target.username}/`, { site: [{ uuid: site.uuid, permissions: ['admin_site'] }] }],
  ] as const) {
    const res = await s.api(method, path, { token: manager.access, body });
    t.is(res.status, 403, `${method} ${path}: ${res.text}`);
  }
  const admins = await rows(s, 'SELECT 1 FROM public.organization_members WHERE organization_uuid = ? AND is_admin', [org.uuid]);
  t.is(admins.length, 1);
  t.is((await s.api('PUT', `${base(org.slug)}${target.username}/`, { token: owner.access, body: { is_admin: true, site: [{ uuid: site.uuid, permissions: ['admin_site'] }] } })).status, 200);
});

test('member bodies (e-mails) are for members: a non-member holding view_organization by a stray grant sees nothing; lists refuse prototype keys as ordering', async (t) => {
  const { owner, org } = await orgWithSite('Private');
  const outsider = await makeUser(s, root, 'outsider');
  await rows(s, `INSERT INTO public.object_permissions (user_uuid, permission_id, object_type, object_uuid) SELECT ?, id, 'organization', ? FROM public.permissions WHERE codename = 'view_organization'`, [outsider.uuid, org.uuid]);
  t.is((await s.api('GET', `/api/cloud/organizations/${org.slug}/`, { token: outsider.access })).status, 200);
  t.is((await s.api('GET', base(org.slug), { token: outsider.access })).status, 404);
  t.is((await s.api('GET', `${base(org.slug)}${owner.username}/`, { token: outsider.access })).status, 404);
  for (const path of [`${base(org.slug)}?ordering=constructor`, '/api/cloud/organizations/?ordering=__proto__', '/api/cloud/groups/?ordering=-toString']) {
    const res = await s.api('GET', path, { token: owner.access });
    t.is(res.status, 400, path);
    t.truthy(res.body.errors.ordering, path);
  }
});

test('GET a member, change one field, PUT it back (groups and sites in their GET form)', async (t) => {
  const { owner, org, site } = await orgWithSite('Roundtrip');
  const u = await makeUser(s, root, 'rt');
  await addMember(s, root, org.slug, u.username);
  const g = (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: `RT ${org.slug}`, permissions: ['view_site'] } })).body.data.id;
  await s.api('PUT', `${base(org.slug)}${u.username}/`, { token: owner.access, body: { groups: [g], site: [{ uuid: site.uuid, permissions: ['view_site'] }] } });
  const got = (await s.api('GET', `${base(org.slug)}${u.username}/`, { token: owner.access })).body;
  got.sites[0].permissions.push('access_site');
  const put = await s.api('PUT', `${base(org.slug)}${u.username}/`, { token: owner.access, body: got });
  t.is(put.status, 200, put.text);
  t.deepEqual(put.body.sites[0].permissions.sort(), ['access_site', 'view_site']);
  t.deepEqual(put.body.groups, got.groups);
  const changed = await s.api('PUT', `${base(org.slug)}${u.username}/`, { token: owner.access, body: { ...put.body, email: 'other@example.com' } });
  t.is(changed.status, 400);
  t.deepEqual(changed.body.errors, { email: ['This field is read-only and cannot be changed.'] });
  const both = await s.api('PUT', `${base(org.slug)}${u.username}/`, { token: owner.access, body: { site: [], sites: [] } });
  t.is(both.status, 400);
});
