// Organizations: create (slugs, owner), list (visibility, filters, ordering, pagination), get,
// update (deactivation hides), privileges (roles and groups), permissions, and the delete cascade.
import test from 'ava';
import { PERMISSION_DENIED_DETAIL } from '../../shared/errors.ts';
import { createTestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { addMember, db, makeOrg, makeUser, PASSWORD, rows, type TestUser } from './org-helpers.ts';

let s: TestServer;
let root: string;
test.before(async () => {
  s = await startTestServer({ QUOTA_ORGANIZATIONS_PER_USER: "0" }) // one owner founds many here; quotas: quotas.test.ts;
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

const ORG_KEYS = ['uuid', 'name', 'slug', 'is_active', 'created', 'modified'];

test('create: 201 envelope, generated slug, the creator is owner and admin; get by slug, UUID and alias', async (t) => {
  const u = await makeUser(s, root, 'founder');
  const res = await s.api('POST', '/api/cloud/organizations/', { token: u.access, body: { name: 'Founders Club' } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body), ['status', 'message', 'data']);
  t.is(res.body.status, 'success');
  t.is(res.body.message, 'Organization created successfully.');
  t.deepEqual(Object.keys(res.body.data), ORG_KEYS);
  t.like(res.body.data, { name: 'Founders Club', slug: 'founders-club', is_active: true });
  const bySlug = await s.api('GET', '/api/cloud/organizations/founders-club/', { token: u.access });
  t.is(bySlug.status, 200);
  t.deepEqual(bySlug.body, res.body.data);
  t.deepEqual((await s.api('GET', `/api/cloud/organizations/${res.body.data.uuid}/`, { token: u.access })).body, res.body.data);
  t.deepEqual((await s.api('GET', '/api/organizations/founders-club/', { token: u.access })).body, res.body.data);
  const members = await s.api('GET', '/api/cloud/organizations/founders-club/members/', { token: u.access });
  t.is(members.body.count, 1);
  t.like(members.body.results[0], { username: u.username, is_owner: true, is_admin: true });
});

test('slugs: -2, -3 on collision, distinct under parallel creates; a given slug is validated and unique', async (t) => {
  const u = await makeUser(s, root);
  const made = [];
  for (let i = 0; i < 3; i++) made.push((await makeOrg(s, u.access, 'Acme Corp')).slug);
  t.deepEqual(made, ['acme-corp', 'acme-corp-2', 'acme-corp-3']);
  const parallel = await Promise.all(Array.from({ length: 6 }, () => s.api('POST', '/api/cloud/organizations/', { token: u.access, body: { name: 'Race Co' } })));
  t.true(parallel.every((r) => r.status === 201), parallel.map((r) => r.text).join('\n'));
  t.deepEqual(parallel.map((r) => r.body.data.slug).sort(), ['race-co', 'race-co-2', 'race-co-3', 'race-co-4', 'race-co-5', 'race-co-6']);
  const given = await s.api('POST', '/api/cloud/organizations/', { token: u.access, body: { name: 'Whatever', slug: 'my-own-slug' } });
  t.is(given.status, 201);
  t.is(given.body.data.slug, 'my-own-slug');
  const dup = await s.api('POST', '/api/cloud/organizations/', { token: u.access, body: { name: 'Other', slug: 'my-own-slug' } });
  t.is(dup.status, 400);
  t.deepEqual(dup.body.errors, { slug: ['An organization with that slug already exists.'] });
  // A name without letters or digits still gets a slug.
  t.is((await makeOrg(s, u.access, '***')).slug, 'organization');
});

test('bad input names the field and creates nothing', async (t) => {
  const u = await makeUser(s, root);
  const cases: [unknown, string][] = [
    [{ name: 'Bad', slug: 'Upper-Case' }, 'slug'],
    [{ name: 'Bad', slug: 'two  words' }, 'slug'],
    [{ name: 'Bad', slug: '-leading' }, 'slug'],
    [{ name: 'Bad', slug: 'trailing-' }, 'slug'],
    [{ name: 'Bad', slug: "x'; DROP TABLE organizations; --" }, 'slug'],
    [{ name: 'Bad', slug: '0f8fad5b-d9cb-469f-a165-70867728950e' }, 'slug'],
    [{ name: '' }, 'name'],
    [{ name: '   ' }, 'name'],
    [{}, 'name'],
    [{ name: 'Bad', owner: 'me' }, 'owner'],
    [{ name: 42 }, 'name'],
  ];
  for (const [body, field] of cases) {
    const res = await s.api('POST', '/api/cloud/organizations/', { token: u.access, body });
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.body.code, 'VALIDATION_ERROR');
    t.truthy(res.body.errors?.[field], `${JSON.stringify(body)} → ${res.text}`);
  }
  t.is((await s.api('GET', '/api/cloud/organizations/?is_active=all', { token: u.access })).body.count, 0);
});

test('list: only the organizations the caller can view; superusers see all', async (t) => {
  const a = await makeUser(s, root, 'lista');
  const b = await makeUser(s, root, 'listb');
  const oa = await makeOrg(s, a.access, 'Visible To A');
  const ob = await makeOrg(s, b.access, 'Visible To B');
  await addMember(s, root, ob.slug, a.username);
  const seenByA = await s.api('GET', '/api/cloud/organizations/?search=visible-to', { token: a.access });
  t.deepEqual(seenByA.body.results.map((o: { slug: string }) => o.slug), [oa.slug, ob.slug]);
  const seenByB = await s.api('GET', '/api/cloud/organizations/?search=visible', { token: b.access });
  t.deepEqual(seenByB.body.results.map((o: { slug: string }) => o.slug), [ob.slug]);
  const loner = await makeUser(s, root);
  t.like((await s.api('GET', '/api/cloud/organizations/', { token: loner.access })).body, { count: 0, next: null, previous: null, results: [] });
  t.is((await s.api('GET', `/api/cloud/organizations/${oa.slug}/`, { token: loner.access })).status, 404);
  const all = await s.api('GET', '/api/cloud/organizations/?search=visible-to', { token: root });
  t.is(all.body.count, 2);
  t.deepEqual((await s.api('GET', '/api/organizations/?search=visible-to', { token: root })).body.results, all.body.results);
});

test('list: search (name or slug), is_active default and overrides, ordering, pagination', async (t) => {
  const u = await makeUser(s, root);
  const names = ['Zeta Filter', 'Alpha Filter', 'Mid Filter'];
  for (const name of names) await makeOrg(s, u.access, name);
  const hidden = await makeOrg(s, u.access, 'Sleepy Filter');
  t.is((await s.api('PUT', `/api/cloud/organizations/${hidden.slug}/`, { token: u.access, body: { is_active: false } })).status, 200);
  const get = (qs: string) => s.api('GET', `/api/cloud/organizations/?${qs}`, { token: u.access });
  const slugs = (r: { body: { results: { slug: string }[] } }) => r.body.results.map((o) => o.slug);
  t.deepEqual(slugs(await get('search=filter')), ['alpha-filter', 'mid-filter', 'zeta-filter']);
  t.deepEqual(slugs(await get('search=ALPHA-f')), ['alpha-filter']);
  for (const v of ['true', '1']) t.is((await get(`search=filter&is_active=${v}`)).body.count, 3);
  for (const v of ['false', '0']) t.deepEqual(slugs(await get(`search=filter&is_active=${v}`)), ['sleepy-filter']);
  for (const v of ['all', '*']) t.is((await get(`search=filter&is_active=${encodeURIComponent(v)}`)).body.count, 4);
  t.deepEqual(slugs(await get('search=filter&ordering=-name')), ['zeta-filter', 'mid-filter', 'alpha-filter']);
  t.deepEqual(slugs(await get('search=filter&ordering=-created')), ['mid-filter', 'alpha-filter', 'zeta-filter']);
  t.deepEqual(slugs(await get('search=filter&ordering=created')), ['zeta-filter', 'alpha-filter', 'mid-filter']);
  t.deepEqual(slugs(await get('search=filter&ordering=slug&is_active=all')), ['alpha-filter', 'mid-filter', 'sleepy-filter', 'zeta-filter']);
  t.is((await get('search=filter&ordering=-modified&is_active=all')).body.results[0].slug, 'sleepy-filter');
  const bad = await get('ordering=owner');
  t.is(bad.status, 400);
  t.truthy(bad.body.errors.ordering);
  t.is((await get('is_active=maybe')).status, 400);
  const page = await get('search=filter&page_size=2&page=2');
  t.like(page.body, { count: 3, next: null });
  t.deepEqual(slugs(page), ['zeta-filter']);
  t.is(page.body.previous, `${s.url}/api/cloud/organizations/?search=filter&page_size=2`);
  t.is((await get('search=filter&page=3&page_size=2')).status, 404);
  for (const search of ["' OR '1'='1", '%', '_']) t.is((await get(`search=${encodeURIComponent(search)}`)).body.count, 0, search);
});

test('PUT: name, slug, is_active; an inactive organization leaves the default list but stays reachable', async (t) => {
  const u = await makeUser(s, root);
  const org = await makeOrg(s, u.access, 'Changeable');
  const other = await makeOrg(s, u.access, 'Taken Slug');
  const res = await s.api('PUT', `/api/cloud/organizations/${org.slug}/`, { token: u.access, body: { name: 'Changed', slug: 'changed-slug', is_active: false } });
  t.is(res.status, 200);
  t.like(res.body, { uuid: org.uuid, name: 'Changed', slug: 'changed-slug', is_active: false });
  t.deepEqual(Object.keys(res.body), ORG_KEYS);
  t.false((await s.api('GET', '/api/cloud/organizations/', { token: u.access })).body.results.some((o: { uuid: string }) => o.uuid === org.uuid));
  t.deepEqual((await s.api('GET', '/api/cloud/organizations/changed-slug/', { token: u.access })).body, res.body);
  t.is((await s.api('GET', `/api/cloud/organizations/${org.slug}/`, { token: u.access })).status, 404);
  const dup = await s.api('PUT', '/api/cloud/organizations/changed-slug/', { token: u.access, body: { slug: other.slug } });
  t.is(dup.status, 400);
  t.deepEqual(dup.body.errors, { slug: ['An organization with that slug already exists.'] });
  for (const body of [{ slug: 'Bad Slug' }, { is_active: 'no' }, { name: '' }, { uuid: crypto.randomUUID() }, { owner: 'x' }]) {
    const bad = await s.api('PUT', '/api/cloud/organizations/changed-slug/', { token: u.access, body });
    t.is(bad.status, 400, JSON.stringify(body));
  }
  t.like((await s.api('GET', `/api/cloud/organizations/${org.uuid}/`, { token: u.access })).body, { name: 'Changed', slug: 'changed-slug', is_active: false });
  const back = await s.api('PUT', '/api/cloud/organizations/changed-slug/', { token: u.access, body: { is_active: true } });
  t.true(back.body.is_active);
});

test('permissions: non-members get 404, members without the permission 403 with the exact detail; admins cannot delete', async (t) => {
  const owner = await makeUser(s, root);
  const member = await makeUser(s, root);
  const admin = await makeUser(s, root);
  const stranger = await makeUser(s, root);
  const org = await makeOrg(s, owner.access, 'Guarded');
  await addMember(s, root, org.slug, member.username);
  await addMember(s, root, org.slug, admin.username);
  t.is((await s.api('POST', `/api/cloud/organizations/${org.slug}/members/${admin.username}/make_admin/`, { token: owner.access })).status, 200);
  const url = `/api/cloud/organizations/${org.slug}/`;
  const strangerCalls: [string, string, unknown][] = [
    ['GET', url, undefined],
    ['PUT', url, { name: 'X' }],
    ['DELETE', url, undefined],
    ['GET', `${url}privileges/`, undefined],
    ['GET', `${url}members/`, undefined],
  ];
  for (const [method, path, body] of strangerCalls) {
    const res = await s.api(method, path, { token: stranger.access, body });
    t.is(res.status, 404, `${method} ${path}`);
    t.is(res.body.code, 'NOT_FOUND');
  }
  t.is((await s.api('GET', url, { token: member.access })).status, 200);
  for (const [method, body] of [['PUT', { name: 'X' }], ['DELETE', undefined]] as const) {
    const res = await s.api(method, url, { token: member.access, body });
    t.is(res.status, 403, method);
    t.like(res.body, { status: 'error', code: 'PERMISSION_DENIED', detail: PERMISSION_DENIED_DETAIL });
  }
  t.is((await s.api('PUT', url, { token: admin.access, body: { name: 'Renamed By Admin' } })).status, 200);
  const adminDelete = await s.api('DELETE', url, { token: admin.access });
  t.is(adminDelete.status, 403);
  t.is(adminDelete.body.detail, PERMISSION_DENIED_DETAIL);
  t.is((await s.api('GET', url, { token: root })).body.name, 'Renamed By Admin');
  t.is((await s.api('GET', '/api/cloud/organizations/', { token: undefined })).status, 401);
});

test('privileges: owner all, admin all but delete, member view only, group-inherited ones included, superuser all', async (t) => {
  const owner = await makeUser(s, root);
  const admin = await makeUser(s, root);
  const member = await makeUser(s, root);
  const org = await makeOrg(s, owner.access, 'Privileged');
  for (const u of [admin, member]) await addMember(s, root, org.slug, u.username);
  await s.api('POST', `/api/cloud/organizations/${org.slug}/members/${admin.username}/make_admin/`, { token: owner.access });
  const priv = async (token: string) => {
    const res = await s.api('GET', `/api/cloud/organizations/${org.slug}/privileges/`, { token });
    t.is(res.status, 200);
    t.deepEqual(Object.keys(res.body), ['permissions']);
    return res.body.permissions;
  };
  const all = ['view_organization', 'change_organization', 'delete_organization', 'manage_organization', 'invite_members'];
  t.deepEqual(await priv(owner.access), all);
  t.deepEqual(await priv(root), all);
  t.deepEqual(await priv(admin.access), all.filter((p) => p !== 'delete_organization'));
  t.deepEqual(await priv(member.access), ['view_organization']);
  const group = await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Inviters', permissions: ['invite_members', 'view_site'] } });
  t.is(group.status, 201);
  const put = await s.api('PUT', `/api/cloud/organizations/${org.slug}/members/${member.username}/`, { token: owner.access, body: { groups: [group.body.data.id] } });
  t.is(put.status, 200, put.text);
  t.deepEqual(await priv(member.access), ['view_organization', 'invite_members']);
  t.deepEqual((await s.api('GET', `/api/organizations/${org.uuid}/privileges/`, { token: member.access })).body.permissions, ['view_organization', 'invite_members']);
});

test('DELETE: sites and schemas, memberships, invitations and grants go; sole-organization members are soft-deleted', async (t) => {
  const owner = await makeUser(s, root, 'delowner');
  const sole = await makeUser(s, root, 'delsole');
  const shared = await makeUser(s, root, 'delshared');
  const superMember = await makeUser(s, root, 'delsuper', { is_superuser: true });
  // Two sites in one organization owned by `owner` (the test utility makes one organization per site).
  const site1 = await createTestSite(db(s), { ownerUuid: owner.uuid });
  const site2 = await createTestSite(db(s));
  await db(s).execute('UPDATE public.sites SET organization_uuid = ? WHERE uuid = ?', [site1.organizationUuid, site2.uuid]);
  const [{ slug }] = await rows<{ slug: string }>(s, 'SELECT slug FROM public.organizations WHERE uuid = ?', [site1.organizationUuid]);
  for (const u of [sole, shared, superMember]) await addMember(s, root, slug, u.username);
  const elsewhere = await makeOrg(s, shared.access, 'Elsewhere');
  const group = await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Cascade Group' } });
  const put = await s.api('PUT', `/api/cloud/organizations/${slug}/members/${sole.username}/`, {
    token: owner.access,
    body: { groups: [group.body.data.id], site: [{ uuid: site1.uuid, permissions: ['view_site', 'access_site'] }, { uuid: site2.uuid, permissions: ['view_site'] }] },
  });
  t.is(put.status, 200, put.text);
  await db(s).execute(
    `INSERT INTO public.object_permissions (group_id, permission_id, object_type, object_uuid) SELECT ?, id, 'organization', ? FROM public.permissions WHERE codename = 'view_organization'`,
    [group.body.data.id, site1.organizationUuid],
  );
  await db(s).execute(`INSERT INTO public.invitations (uuid, token, organization_uuid, invitee_identifier, expires_at) VALUES (?, ?, ?, 'x@example.com', now() + interval '1 day')`, [
    crypto.randomUUID(),
    crypto.randomUUID(),
    site1.organizationUuid,
  ]);

  const res = await s.api('DELETE', `/api/cloud/organizations/${slug}/`, { token: owner.access });
  t.is(res.status, 200);
  t.deepEqual(res.body, { status: 'success', message: 'Organization deleted.' });

  t.is((await s.api('GET', `/api/cloud/organizations/${slug}/`, { token: root })).status, 404);
  const schemas = await rows(s, 'SELECT schema_name FROM information_schema.schemata WHERE schema_name IN (?, ?)', [site1.schema, site2.schema]);
  t.deepEqual(schemas, []);
  const count = async (sql: string, params: unknown[]) => Number((await rows<{ n: string }>(s, `SELECT count(*) AS n FROM ${sql}`, params))[0].n);
  const org = site1.organizationUuid;
  t.is(await count('public.sites WHERE organization_uuid = ?', [org]), 0);
  t.is(await count('public.domains WHERE site_uuid IN (?, ?)', [site1.uuid, site2.uuid]), 0);
  t.is(await count('public.tenant_schemas WHERE schema_name IN (?, ?)', [site1.schema, site2.schema]), 0);
  t.is(await count('public.organization_members WHERE organization_uuid = ?', [org]), 0);
  t.is(await count('public.invitations WHERE organization_uuid = ?', [org]), 0);
  t.is(await count('public.object_permissions WHERE object_uuid IN (?, ?, ?)', [org, site1.uuid, site2.uuid]), 0);
  const user = async (u: TestUser) => (await s.api('GET', `/api/cloud/users/${u.uuid}/`, { token: root })).body;
  t.like(await user(sole), { is_deleted: true, is_active: false });
  t.is((await s.api('GET', '/api/profile/', { token: sole.access })).status, 401, 'the soft-deleted member\'s tokens are revoked');
  t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: sole.username, password: PASSWORD } })).status, 401);
  t.like(await user(shared), { is_deleted: false, is_active: true });
  t.like(await user(superMember), { is_deleted: false, is_active: true });
  t.like(await user(owner), { is_deleted: false, is_active: true }, 'the acting user keeps the account');
  t.is((await s.api('GET', `/api/cloud/organizations/${elsewhere.slug}/members/${shared.username}/`, { token: shared.access })).status, 200);
  t.is((await s.api('GET', `/api/cloud/groups/${group.body.data.id}/`, { token: root })).status, 200, 'groups are platform-wide and stay');
});

test('routes of organizations exist on the platform host only', async (t) => {
  const site = await createTestSite(db(s));
  t.is((await s.api('GET', '/api/cloud/organizations/', { token: root, host: site.domain })).status, 404);
  t.is((await s.api('GET', '/api/cloud/groups/', { token: root, host: site.domain })).status, 404);
});
