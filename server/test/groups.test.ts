// Groups (`/api/cloud/groups/`) and the permission catalogue (`/api/cloud/permissions/`):
// bodies, envelopes, who may change groups, bad input, aliases.
import test from 'ava';
import { PERMISSION_DENIED_DETAIL } from '../../shared/errors.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { addMember, makeOrg, makeUser, rows } from './org-helpers.ts';

let s: TestServer;
let root: string;
test.before(async () => {
  s = await startTestServer();
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

const SITE_PERMS = ['view_site', 'change_site', 'delete_site', 'access_site', 'manage_site', 'manage_site_users', 'admin_site'];
const ORG_PERMS = ['view_organization', 'change_organization', 'delete_organization', 'manage_organization', 'invite_members'];

test('create: 201 envelope {id, name, permissions}; get, list and the alias agree', async (t) => {
  const res = await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Site Operators', permissions: ['access_site', 'view_site', 'view_site'] } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body), ['status', 'message', 'data']);
  t.is(res.body.message, 'Group created successfully.');
  t.deepEqual(Object.keys(res.body.data), ['id', 'name', 'permissions']);
  t.like(res.body.data, { name: 'Site Operators', permissions: ['view_site', 'access_site'] });
  const id = res.body.data.id;
  t.deepEqual((await s.api('GET', `/api/cloud/groups/${id}/`, { token: root })).body, res.body.data);
  t.deepEqual((await s.api('GET', `/api/groups/${id}/`, { token: root })).body, res.body.data);
  const list = await s.api('GET', '/api/cloud/groups/?search=operators', { token: root });
  t.like(list.body, { count: 1, next: null, previous: null });
  t.deepEqual(list.body.results, [res.body.data]);
  t.deepEqual((await s.api('POST', '/api/groups/', { token: root, body: { name: 'Via Alias' } })).body.data.permissions, []);
});

test('bad input: duplicate name (any case), unknown permission, blank or unknown fields → 400; nothing created', async (t) => {
  await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Unique Group' } });
  const cases: [unknown, Record<string, string[]>][] = [
    [{ name: 'UNIQUE group' }, { name: ['A group with that name already exists.'] }],
    [{ name: 'New One', permissions: ['view_site', 'fly', 'swim'] }, { permissions: ['Unknown permissions: fly, swim.'] }],
    [{ name: '  ' }, { name: ['This field may not be blank.'] }],
    [{ name: 'X', color: 'red' }, { color: ['Unknown field.'] }],
    [{ permissions: [] }, { name: ['This field is required.'] }],
    [{ name: 'Y', permissions: 'view_site' }, { permissions: ['Expected a list of items.'] }],
  ];
  for (const [body, errors] of cases) {
    const res = await s.api('POST', '/api/cloud/groups/', { token: root, body });
    t.is(res.status, 400, JSON.stringify(body));
    t.deepEqual(res.body.errors, errors, JSON.stringify(body));
  }
  t.is((await s.api('GET', '/api/cloud/groups/?search=unique', { token: root })).body.count, 1);
  const all = (await s.api('GET', '/api/cloud/groups/?page_size=100', { token: root })).body.results.map((g: { name: string }) => g.name);
  for (const name of ['New One', 'X', 'Y']) t.false(all.includes(name), name);
});

test('PUT renames and replaces the permission set; DELETE removes it and its memberships', async (t) => {
  const g = (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Mutable', permissions: ['view_site'] } })).body.data;
  await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Other Name' } });
  const put = await s.api('PUT', `/api/cloud/groups/${g.id}/`, { token: root, body: { name: 'Mutated', permissions: ['invite_members', 'admin_site'] } });
  t.is(put.status, 200);
  t.deepEqual(put.body, { id: g.id, name: 'Mutated', permissions: ['invite_members', 'admin_site'] });
  t.deepEqual((await s.api('PUT', `/api/cloud/groups/${g.id}/`, { token: root, body: { name: 'mutated' } })).body.permissions, ['invite_members', 'admin_site']);
  t.deepEqual((await s.api('PUT', `/api/cloud/groups/${g.id}/`, { token: root, body: { permissions: [] } })).body, { id: g.id, name: 'mutated', permissions: [] });
  const dup = await s.api('PUT', `/api/cloud/groups/${g.id}/`, { token: root, body: { name: 'OTHER NAME', permissions: ['view_site'] } });
  t.is(dup.status, 400);
  t.deepEqual(dup.body.errors, { name: ['A group with that name already exists.'] });
  t.deepEqual((await s.api('GET', `/api/cloud/groups/${g.id}/`, { token: root })).body, { id: g.id, name: 'mutated', permissions: [] });
  // In use by a member: deleting the group takes the membership with it.
  const owner = await makeUser(s, root);
  const org = await makeOrg(s, owner.access, 'Group Users');
  await s.api('PUT', `/api/cloud/organizations/${org.slug}/members/${owner.username}/`, { token: owner.access, body: { groups: [g.id] } });
  const del = await s.api('DELETE', `/api/cloud/groups/${g.id}/`, { token: root });
  t.deepEqual(del.body, { status: 'success', message: 'Group deleted.' });
  t.is((await s.api('GET', `/api/cloud/groups/${g.id}/`, { token: root })).status, 404);
  t.deepEqual(await rows(s, 'SELECT 1 FROM public.member_groups WHERE group_id = ?', [g.id]), []);
  t.deepEqual((await s.api('GET', `/api/cloud/organizations/${org.slug}/members/${owner.username}/`, { token: owner.access })).body.groups, []);
  for (const ref of ['999999', 'abc', '0', '-1', '1.5', '99999999999999999999']) {
    const res = await s.api('GET', `/api/cloud/groups/${ref}/`, { token: root });
    t.is(res.status, 404, ref);
    t.is(res.body.message, 'Group not found.');
  }
});

test('staff manage groups; other users read them but get 403 on changes', async (t) => {
  const staff = await makeUser(s, root, 'staff', { is_staff: true });
  const plain = await makeUser(s, root);
  const made = await s.api('POST', '/api/cloud/groups/', { token: staff.access, body: { name: 'Staff Made' } });
  t.is(made.status, 201);
  const id = made.body.data.id;
  t.is((await s.api('GET', '/api/cloud/groups/?search=staff%20made', { token: plain.access })).body.count, 1);
  t.is((await s.api('GET', `/api/cloud/groups/${id}/`, { token: plain.access })).status, 200);
  const calls: [string, string, unknown][] = [
    ['POST', '/api/cloud/groups/', { name: 'Sneaky' }],
    ['PUT', `/api/cloud/groups/${id}/`, { name: 'Sneaky' }],
    ['DELETE', `/api/cloud/groups/${id}/`, undefined],
  ];
  for (const [method, path, body] of calls) {
    const res = await s.api(method, path, { token: plain.access, body });
    t.is(res.status, 403, `${method} ${path}`);
    t.like(res.body, { code: 'PERMISSION_DENIED', detail: PERMISSION_DENIED_DETAIL });
  }
  t.is((await s.api('GET', `/api/cloud/groups/${id}/`, { token: root })).body.name, 'Staff Made');
  t.is((await s.api('DELETE', `/api/cloud/groups/${id}/`, { token: staff.access })).status, 200);
  t.is((await s.api('GET', '/api/cloud/groups/')).status, 401);
});

test('list: pagination and ordering', async (t) => {
  for (const name of ['Paged C', 'Paged A', 'Paged B']) await s.api('POST', '/api/cloud/groups/', { token: root, body: { name } });
  const get = (qs: string) => s.api('GET', `/api/cloud/groups/?search=paged&${qs}`, { token: root });
  const names = (r: { body: { results: { name: string }[] } }) => r.body.results.map((g) => g.name);
  t.deepEqual(names(await get('')), ['Paged A', 'Paged B', 'Paged C']);
  t.deepEqual(names(await get('ordering=-name')), ['Paged C', 'Paged B', 'Paged A']);
  t.deepEqual(names(await get('ordering=id')), ['Paged C', 'Paged A', 'Paged B']);
  const page = await get('page_size=2&page=2');
  t.like(page.body, { count: 3, next: null });
  t.deepEqual(names(page), ['Paged C']);
  t.is((await get('ordering=permissions')).status, 400);
  t.is((await get('page=9')).status, 404);
});

test('permissions: the catalogue, filtered by model, paginated; one by id; readable by every signed-in user', async (t) => {
  const plain = await makeUser(s, root);
  const all = await s.api('GET', '/api/cloud/permissions/', { token: plain.access });
  t.is(all.status, 200);
  t.like(all.body, { count: 12, next: null, previous: null });
  t.deepEqual(all.body.results.map((p: { codename: string }) => p.codename), [...ORG_PERMS, ...SITE_PERMS]);
  t.deepEqual(Object.keys(all.body.results[0]), ['id', 'codename', 'name', 'model']);
  t.like(all.body.results[0], { codename: 'view_organization', name: 'Can view organization', model: 'organization' });
  const site = await s.api('GET', '/api/cloud/permissions/?model=site', { token: plain.access });
  t.deepEqual(site.body.results.map((p: { codename: string }) => p.codename), SITE_PERMS);
  t.is((await s.api('GET', '/api/permissions/?model=organization', { token: plain.access })).body.count, 5);
  t.is((await s.api('GET', '/api/cloud/permissions/?model=nothing', { token: plain.access })).body.count, 0);
  t.is((await s.api('GET', '/api/cloud/permissions/?search=invite', { token: plain.access })).body.results[0].codename, 'invite_members');
  const paged = await s.api('GET', '/api/cloud/permissions/?page_size=5&page=2', { token: plain.access });
  t.is(paged.body.results.length, 5);
  t.truthy(paged.body.next);
  const one = all.body.results[7];
  t.deepEqual((await s.api('GET', `/api/cloud/permissions/${one.id}/`, { token: plain.access })).body, one);
  t.deepEqual((await s.api('GET', `/api/permissions/${one.id}/`, { token: plain.access })).body, one);
  t.is((await s.api('GET', '/api/cloud/permissions/9999/', { token: plain.access })).status, 404);
  t.is((await s.api('GET', '/api/cloud/permissions/view_site/', { token: plain.access })).status, 404);
});

test('a member in a group inherits its organization permissions, visible to the organization services', async (t) => {
  const owner = await makeUser(s, root);
  const member = await makeUser(s, root);
  const org = await makeOrg(s, owner.access, 'Inheritance');
  await addMember(s, root, org.slug, member.username);
  const g = (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Managers', permissions: ['manage_organization'] } })).body.data;
  const other = await makeUser(s, root);
  await addMember(s, root, org.slug, other.username);
  const removeOther = () => s.api('DELETE', `/api/cloud/organizations/${org.slug}/members/${other.username}/`, { token: member.access });
  t.is((await removeOther()).status, 403);
  await s.api('PUT', `/api/cloud/organizations/${org.slug}/members/${member.username}/`, { token: owner.access, body: { groups: [g.id] } });
  t.is((await removeOther()).status, 200);
});
