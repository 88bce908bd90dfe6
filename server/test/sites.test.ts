// Sites: create (rules 1–5, all or nothing), the default data of a new schema, reads, lists
// and their filters, update, delete, privileges, permissions. (Environment prefixes:
// sites-environment.test.ts; host routing: sites-routing.test.ts.)
import test from 'ava';
import { CURRENT_TENANT_VERSION } from '../../shared/tenancy/migrations.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { grantSite, makeOrg, makeUser, schemaExists, sql, type TestUser } from './site-fixtures.ts';

let s: TestServer;
let root: string;
let owner: TestUser;
let admin: TestUser;
let member: TestUser;
let outsider: TestUser;
const ORG = 'acme';

test.before(async () => {
  // Its tests make sites of one organization at once: not a test of the long-operation limit (docs/operations.md).
  s = await startTestServer({ LONG_OPERATIONS_PER_SITE: '100', LONG_OPERATIONS_TOTAL: '100' });
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'owner');
  admin = await makeUser(s, root, 'orgadmin');
  member = await makeUser(s, root, 'member');
  outsider = await makeUser(s, root, 'outsider');
  await makeOrg(s, ORG, [{ uuid: owner.uuid, owner: true }, { uuid: admin.uuid, admin: true }, { uuid: member.uuid }]);
  await makeOrg(s, 'other', [{ uuid: outsider.uuid, owner: true }]);
});
test.after.always(async () => {
  await s?.close();
});

const create = (body: Record<string, unknown>, token = owner.token, org = ORG) => s.api('POST', `/api/cloud/organizations/${org}/sites/`, { token, body });
async function site(name: string, extra: Record<string, unknown> = {}, token = owner.token): Promise<any> {
  const res = await create({ name, ...extra }, token);
  if (res.status !== 201) throw new Error(`site create failed: ${res.text}`);
  return res.body.data;
}
/** What exists of sites named like `pattern` (ILIKE): rows, domains, schema versions (tests of one file run concurrently: count by name). */
const traces = async (pattern: string) =>
  (
    await sql(
      s,
      `SELECT count(*)::int AS sites, (SELECT count(*)::int FROM public.domains d JOIN public.sites x ON x.uuid = d.site_uuid WHERE x.name ILIKE ?) AS domains,
              (SELECT count(*)::int FROM public.tenant_schemas t JOIN public.sites x ON x.schema_name = t.schema_name WHERE x.name ILIKE ?) AS versions
         FROM public.sites WHERE name ILIKE ?`,
      [pattern, pattern, pattern],
    )
  )[0];
const NOTHING = { sites: 0, domains: 0, versions: 0 };

const SITE_KEYS = ['uuid', 'slug', 'name', 'description', 'schema_name', 'environment', 'is_active', 'site_settings', 'organization', 'primary_domain', 'created_at', 'modified_at'];

test('create: 201 envelope with the site fields; readable by slug, by UUID and through the alias', async (t) => {
  const res = await create({ name: 'Main Shop', description: 'The shop', site_settings: { theme: 'dark', n: 1 } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body), ['status', 'message', 'data']);
  t.like(res.body, { status: 'success', message: 'Site created successfully.' });
  const data = res.body.data;
  t.deepEqual(Object.keys(data).sort(), [...SITE_KEYS].sort());
  t.like(data, {
    slug: 'main-shop',
    name: 'Main Shop',
    description: 'The shop',
    schema_name: 'main_shop',
    environment: 'production',
    is_active: true,
    organization: ORG,
    primary_domain: 'main-shop.localhost',
  });
  t.deepEqual(data.site_settings, { theme: 'dark', n: 1 });
  for (const path of [`/api/cloud/sites/main-shop/`, `/api/cloud/sites/${data.uuid}/`, `/api/sites/main-shop/`, `/api/cloud/sites/MAIN-SHOP/`]) {
    const got = await s.api('GET', path, { token: owner.token });
    t.is(got.status, 200, path);
    t.deepEqual(got.body, data, path);
  }
  const [domain] = await sql(s, 'SELECT domain, slug, is_primary, is_active FROM public.domains WHERE site_uuid = ?', [data.uuid]);
  t.deepEqual(domain, { domain: 'main-shop.localhost', slug: 'main-shop-localhost', is_primary: true, is_active: true });
});

test('create seeds the new schema: owners and admins as tenant superusers, groups, tags, permissions', async (t) => {
  const data = await site('Seeded');
  const q = (table: string, cols = '*') => sql(s, `SELECT ${cols} FROM "${data.schema_name}".${table}`);
  const users = await q('users', 'username, email, password, platform_user_uuid, is_superuser, is_staff, is_active');
  t.deepEqual(
    users.sort((a, b) => a.username.localeCompare(b.username)),
    [
      { username: 'orgadmin', email: 'orgadmin@example.com', password: null, platform_user_uuid: admin.uuid, is_superuser: true, is_staff: true, is_active: true },
      { username: 'owner', email: 'owner@example.com', password: null, platform_user_uuid: owner.uuid, is_superuser: true, is_staff: true, is_active: true },
    ],
  );
  const groups = (await q('groups', 'name')).map((g) => g.name).sort();
  t.deepEqual(groups, ['Administrators', 'Editors', 'Viewers']);
  const codenames = (await q('permissions', 'codename')).map((p) => p.codename);
  for (const c of ['view_user', 'add_user', 'change_user', 'delete_user', 'view_secret', 'add_secret', 'change_secret', 'delete_secret']) t.true(codenames.includes(c), c);
  t.true((await q('tags')).length >= 1);
  const admins = await sql(s, `SELECT count(*)::int AS n FROM "${data.schema_name}".user_groups ug JOIN "${data.schema_name}".groups g ON g.id = ug.group_id WHERE g.name = 'Administrators'`);
  t.is(admins[0].n, 2);
  const perms = await sql(s, `SELECT count(*)::int AS n FROM "${data.schema_name}".group_permissions gp JOIN "${data.schema_name}".groups g ON g.id = gp.group_id WHERE g.name = 'Administrators'`);
  t.is(perms[0].n, codenames.length);
  const [version] = await sql(s, 'SELECT version FROM public.tenant_schemas WHERE schema_name = ?', [data.schema_name]);
  t.is(version.version, CURRENT_TENANT_VERSION);
});

test('generated schema names: specials become underscores, a leading digit gets one, collisions get _1, _2', async (t) => {
  t.like(await site('Café Bar & Grill'), { schema_name: 'cafe_bar___grill', slug: 'cafe-bar-grill' });
  t.like(await site('123 Go'), { schema_name: '_123_go', slug: '123-go' });
  t.like(await site('Twin'), { schema_name: 'twin', slug: 'twin', primary_domain: 'twin.localhost' });
  t.like(await site('Twin'), { schema_name: 'twin_1', slug: 'twin-2', primary_domain: 'twin-2.localhost' });
  t.like(await site('twin'), { schema_name: 'twin_2', slug: 'twin-3' });
  // A schema that exists in the database without a site is never adopted.
  await sql(s, 'CREATE SCHEMA orphan');
  t.like(await site('Orphan'), { schema_name: 'orphan_1' });
  t.like(await site('Public'), { schema_name: 'public_1' });
  t.like(await site('pg stuff'), { schema_name: '_pg_stuff' });
  t.like(await site('Config'), { slug: 'config-2' }); // `config` is the site-config route
});

test('a supplied schema_name is used; an invalid one is a 400 on schema_name and nothing is created', async (t) => {
  t.like(await site('Custom', { schema_name: 'custom_schema_1' }), { schema_name: 'custom_schema_1' });
  for (const bad of ['Bad', '1abc', 'a-b', 'a b', 'public', 'information_schema', 'pg_mine', 'x'.repeat(64), 'a"; DROP SCHEMA public; --', '']) {
    const res = await create({ name: `Bad ${bad.length}`, schema_name: bad });
    t.is(res.status, 400, bad);
    t.is(res.body.code, 'VALIDATION_ERROR');
    t.truthy(res.body.errors.schema_name, bad);
  }
  t.deepEqual(await traces('Bad %'), NOTHING);
});

test('a duplicate schema_name (of a site, or of an existing schema) is a 400 and leaves nothing behind', async (t) => {
  await site('Holder', { schema_name: 'held_schema' });
  await sql(s, 'CREATE SCHEMA foreign_schema; CREATE TABLE foreign_schema.keep (id int)');
  const dupSite = await create({ name: 'Dup One', schema_name: 'held_schema' });
  t.is(dupSite.status, 400);
  t.deepEqual(dupSite.body.errors, { schema_name: ['A site with this schema name already exists.'] });
  const dupSchema = await create({ name: 'Dup Two', schema_name: 'foreign_schema' });
  t.is(dupSchema.status, 400);
  t.deepEqual(dupSchema.body.errors, { schema_name: ['A schema with this name already exists in the database.'] });
  t.deepEqual(await traces('Dup %'), NOTHING);
  t.is((await sql(s, `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'foreign_schema'`))[0].n, 1, 'the foreign schema is untouched');
  t.is((await sql(s, `SELECT count(*)::int AS n FROM public.sites WHERE schema_name = 'held_schema'`))[0].n, 1);
});

test('all or nothing: a failure after the schema was built (a duplicate domain) rolls back schema, site, version and domain', async (t) => {
  await site('Domain Holder', { domain: 'taken.example.com' });
  const res = await create({ name: 'Rollback', schema_name: 'rollback_probe', domain: 'TAKEN.example.com' });
  t.is(res.status, 400);
  t.deepEqual(res.body.errors, { domain: ['A domain with this host name already exists.'] });
  t.deepEqual(await traces('Rollback'), NOTHING);
  t.false(await schemaExists(s, 'rollback_probe'));
  t.is((await sql(s, `SELECT count(*)::int AS n FROM public.tenant_schemas WHERE schema_name = 'rollback_probe'`))[0].n, 0);
  t.is((await sql(s, `SELECT count(*)::int AS n FROM public.domains WHERE domain = 'taken.example.com'`))[0].n, 1);
});

test('domain and environment on create: a supplied customer host is added unverified beside the primary platform name; bad values are 400s', async (t) => {
  const own = await site('Own Domain', { domain: ' Shop.Example.ORG ', environment: 'testing' });
  t.like(own, { primary_domain: 'own-domain.localhost', environment: 'testing' });
  const domains = await sql(s, 'SELECT domain, is_primary, verified_at IS NOT NULL AS verified FROM public.domains WHERE site_uuid = ? ORDER BY domain', [own.uuid]);
  t.deepEqual(domains, [
    { domain: 'own-domain.localhost', is_primary: true, verified: true },
    { domain: 'shop.example.org', is_primary: false, verified: false },
  ]);
  t.like(await site('Self Named', { domain: 'self-named.localhost' }), { primary_domain: 'self-named.localhost' }, "the site's own platform name may be named");
  for (const domain of ['http://x.example.com', 'a..b.com', 'x.example.com.', 'host.example.com:80', '-x.example.com', 'x_y.example.com', `${'a'.repeat(64)}.com`, 'localhost', '127.0.0.1']) {
    const res = await create({ name: 'Bad Domain', domain });
    t.is(res.status, 400, domain);
    t.truthy(res.body.errors.domain, domain);
  }
  const env = await create({ name: 'Bad Env', environment: 'prod' });
  t.is(env.status, 400);
  t.truthy(env.body.errors.environment);
  const missing = await create({ description: 'no name' });
  t.deepEqual(missing.body.errors, { name: ['This field is required.'] });
  const blank = await create({ name: '   ' });
  t.deepEqual(blank.body.errors, { name: ['This field may not be blank.'] });
  const unknown = await create({ name: 'X', owner: 'me' });
  t.deepEqual(unknown.body.errors, { owner: ['Unknown field.'] });
  t.deepEqual(await traces('Bad D%'), NOTHING);
  t.deepEqual(await traces('Bad Env'), NOTHING);
});

test('create needs manage_organization: unknown or invisible organization 404, plain member 403, admin 201', async (t) => {
  t.is((await create({ name: 'Nope' }, owner.token, 'no-such-org')).status, 404);
  t.is((await create({ name: 'Nope' }, outsider.token)).status, 404);
  const denied = await create({ name: 'Nope' }, member.token);
  t.is(denied.status, 403);
  t.is(denied.body.code, 'PERMISSION_DENIED');
  t.is((await create({ name: 'By Admin' }, admin.token)).status, 201);
  t.is((await create({ name: 'By Root' }, root)).status, 201);
  t.is((await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { body: { name: 'Anon' } })).status, 401);
});

test('parallel creates with one name get distinct slugs and schema names', async (t) => {
  const results = await Promise.all(Array.from({ length: 5 }, () => create({ name: 'Rush' })));
  t.true(results.every((r) => r.status === 201), results.map((r) => r.text).join('\n'));
  const slugs = results.map((r) => r.body.data.slug).sort();
  const schemas = results.map((r) => r.body.data.schema_name).sort();
  t.deepEqual(slugs, ['rush', 'rush-2', 'rush-3', 'rush-4', 'rush-5']);
  t.deepEqual(schemas, ['rush', 'rush_1', 'rush_2', 'rush_3', 'rush_4']);
  for (const schema of schemas) t.true(await schemaExists(s, schema));
});

test('lists: visible sites only, filters, ordering, pagination', async (t) => {
  const org = await makeOrg(s, 'listing', [{ uuid: owner.uuid, owner: true }]);
  const make = (name: string, extra: Record<string, unknown> = {}) => create({ name, ...extra }, owner.token, org.slug).then((r) => r.body.data);
  const alpha = await make('Alpha', { environment: 'staging' });
  const beta = await make('Beta', { environment: 'development', schema_name: 'zeta_schema' });
  const gamma = await make('Gamma');
  await s.api('PATCH', `/api/cloud/sites/${gamma.slug}/`, { token: owner.token, body: { is_active: false } });
  const list = (query = '', token = owner.token) => s.api('GET', `/api/cloud/organizations/${org.slug}/sites/${query}`, { token });
  const names = async (query = '', token = owner.token) => (await list(query, token)).body.results.map((r: { name: string }) => r.name);
  const first = await list();
  t.deepEqual(Object.keys(first.body), ['count', 'next', 'previous', 'results']);
  t.deepEqual(first.body.results[0], alpha);
  t.deepEqual(await names(), ['Alpha', 'Beta']);
  t.deepEqual(await names('?is_active=false'), ['Gamma']);
  t.deepEqual(await names('?is_active=0'), ['Gamma']);
  t.deepEqual(await names('?is_active=all'), ['Alpha', 'Beta', 'Gamma']);
  t.deepEqual(await names('?is_active=*&ordering=-name'), ['Gamma', 'Beta', 'Alpha']);
  t.deepEqual(await names('?environment=staging'), ['Alpha']);
  t.deepEqual(await names('?search=zeta'), ['Beta'], 'search matches schema_name');
  t.deepEqual(await names('?search=alp'), ['Alpha'], 'search matches name');
  t.deepEqual(await names('?ordering=-created_at'), ['Beta', 'Alpha']);
  await s.api('PATCH', `/api/cloud/sites/${alpha.slug}/`, { token: owner.token, body: { description: 'touched' } });
  t.deepEqual(await names('?ordering=-updated_at'), ['Alpha', 'Beta']);
  t.deepEqual(await names('?ordering=updated_at'), ['Beta', 'Alpha']);
  const bad = await list('?ordering=schema');
  t.is(bad.status, 400);
  t.truthy(bad.body.errors.ordering);
  t.is((await list('?environment=prod')).status, 400);
  const page = await list('?is_active=all&page_size=2&page=2');
  t.is(page.body.count, 3);
  t.is(page.body.results.length, 1);
  t.is(page.body.next, null);
  t.is(new URL(page.body.previous).search, '?is_active=all&page_size=2');
  t.is((await list('?page=3&page_size=2')).status, 404);
  // Across organizations: a user sees the sites they hold view_site on; superusers all.
  t.is((await list('', outsider.token)).status, 404, 'an outsider cannot see the organization');
  await grantSite(s, outsider.uuid, beta.uuid, ['view_site']);
  const mine = await s.api('GET', '/api/cloud/sites/?search=eta', { token: outsider.token });
  t.deepEqual(mine.body.results.map((r: { slug: string }) => r.slug), ['beta']);
  const all = await s.api('GET', '/api/cloud/sites/?is_active=all&page_size=100', { token: root });
  t.true(all.body.results.some((r: { slug: string }) => r.slug === gamma.slug));
  t.is((await s.api('GET', '/api/sites/?search=Gamma&is_active=false', { token: root })).body.count, 1);
  const memberSees = (await s.api('GET', '/api/cloud/sites/?is_active=all', { token: member.token })).body.results.map((r: { organization: string }) => r.organization);
  t.false(memberSees.includes(org.slug), 'a plain member of another organization holds no grant here');
  t.is((await s.api('GET', '/api/cloud/organizations/no-such/sites/', { token: root })).status, 404);
});

test('update: PUT and PATCH change the given fields (no prefix, slug and schema stay); change_site needed', async (t) => {
  const data = await site('Editable');
  const patch = await s.api('PATCH', `/api/cloud/sites/${data.slug}/`, {
    token: owner.token,
    body: { name: 'Renamed', description: 'new', site_settings: { a: [1] }, environment: 'staging' },
  });
  t.is(patch.status, 200);
  t.like(patch.body, { name: 'Renamed', description: 'new', environment: 'staging', slug: data.slug, schema_name: data.schema_name, primary_domain: data.primary_domain });
  t.deepEqual(patch.body.site_settings, { a: [1] });
  t.true(patch.body.modified_at > data.modified_at);
  const put = await s.api('PUT', `/api/cloud/sites/${data.uuid}/`, { token: owner.token, body: { description: 'put' } });
  t.like(put.body, { name: 'Renamed', description: 'put' });
  t.deepEqual((await s.api('GET', `/api/cloud/sites/${data.slug}/`, { token: owner.token })).body, put.body);
  t.is((await s.api('PATCH', `/api/cloud/sites/${data.slug}/`, { token: owner.token, body: { schema_name: 'x' } })).status, 400);
  t.is((await s.api('PATCH', `/api/cloud/sites/${data.slug}/`, { token: owner.token, body: { environment: 'qa' } })).status, 400);
  t.is((await s.api('PATCH', `/api/cloud/sites/${data.slug}/`, { token: owner.token, body: { is_active: 'no' } })).status, 400);
  // Grants: view only → 403 on change; no grant → 404.
  await grantSite(s, outsider.uuid, data.uuid, ['view_site']);
  t.is((await s.api('PATCH', `/api/cloud/sites/${data.slug}/`, { token: outsider.token, body: { name: 'x' } })).status, 403);
  t.is((await s.api('PATCH', `/api/cloud/sites/${data.slug}/`, { token: member.token, body: { name: 'x' } })).status, 404);
  await grantSite(s, outsider.uuid, data.uuid, ['change_site']);
  t.is((await s.api('PATCH', `/api/cloud/sites/${data.slug}/`, { token: outsider.token, body: { name: 'By Grant' } })).body.name, 'By Grant');
  t.is((await s.api('GET', '/api/cloud/sites/no-such-site/', { token: root })).status, 404);
});

test('privileges: the effective site permissions of the caller', async (t) => {
  const data = await site('Privy');
  const all = ['view_site', 'change_site', 'delete_site', 'access_site', 'manage_site', 'manage_site_users', 'admin_site'];
  const path = `/api/cloud/sites/${data.slug}/privileges/`;
  t.deepEqual((await s.api('GET', path, { token: owner.token })).body, { permissions: all });
  t.deepEqual((await s.api('GET', path, { token: admin.token })).body, { permissions: all });
  t.deepEqual((await s.api('GET', path, { token: root })).body, { permissions: all });
  t.is((await s.api('GET', path, { token: member.token })).status, 404);
  await grantSite(s, member.uuid, data.uuid, ['view_site', 'access_site']);
  t.deepEqual((await s.api('GET', path, { token: member.token })).body, { permissions: ['view_site', 'access_site'] });
});

test('delete: drops the schema, the domains and the grants; delete_site needed', async (t) => {
  const data = await site('Doomed');
  await s.api('POST', `/api/cloud/sites/${data.slug}/domains/`, { token: owner.token, body: { domain: 'doomed.example.com' } });
  await grantSite(s, outsider.uuid, data.uuid, ['view_site', 'change_site']);
  t.is((await s.api('DELETE', `/api/cloud/sites/${data.slug}/`, { token: outsider.token })).status, 403);
  const res = await s.api('DELETE', `/api/cloud/sites/${data.slug}/`, { token: owner.token });
  t.is(res.status, 200);
  t.deepEqual(res.body, { status: 'success', message: 'Site deleted successfully.' });
  t.false(await schemaExists(s, data.schema_name));
  t.is((await s.api('GET', `/api/cloud/sites/${data.slug}/`, { token: owner.token })).status, 404);
  t.is((await sql(s, 'SELECT count(*)::int AS n FROM public.domains WHERE site_uuid = ?', [data.uuid]))[0].n, 0);
  t.is((await sql(s, `SELECT count(*)::int AS n FROM public.object_permissions WHERE object_uuid = ?`, [data.uuid]))[0].n, 0);
  t.is((await sql(s, 'SELECT count(*)::int AS n FROM public.tenant_schemas WHERE schema_name = ?', [data.schema_name]))[0].n, 0);
  t.is((await s.api('DELETE', `/api/cloud/sites/${data.slug}/`, { token: owner.token })).status, 404);
});
