// Domains of a site: list (filters, default ordering), create, get by slug / host / UUID,
// PUT, PATCH, delete; host-name checks; the one-primary rule under concurrent requests.
import test from 'ava';
import { startTestServer, type TestServer } from './helpers.ts';
import { grantSite, makeOrg, makeUser, sql, type TestUser } from './site-fixtures.ts';

let s: TestServer;
let root: string;
let owner: TestUser;
let viewer: TestUser;

test.before(async () => {
  s = await startTestServer();
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'owner');
  viewer = await makeUser(s, root, 'viewer');
  await makeOrg(s, 'acme', [{ uuid: owner.uuid, owner: true }]);
});
test.after.always(async () => {
  await s?.close();
});

let n = 0;
async function newSite(): Promise<any> {
  const res = await s.api('POST', '/api/cloud/organizations/acme/sites/', { token: owner.token, body: { name: `Site ${++n}` } });
  if (res.status !== 201) throw new Error(res.text);
  return res.body.data;
}
const base = (site: { slug: string }) => `/api/cloud/sites/${site.slug}/domains/`;
const add = (site: { slug: string }, body: Record<string, unknown>, token = owner.token) => s.api('POST', base(site), { token, body });
const primaries = async (site: { uuid: string }) =>
  (await sql(s, 'SELECT domain FROM public.domains WHERE site_uuid = ? AND is_primary', [site.uuid])).map((r) => r.domain);

test('create: 201 envelope with the domain fields; lowercased; slug with hyphens; readable by slug, host and UUID', async (t) => {
  const site = await newSite();
  const res = await add(site, { domain: 'WWW.Example.com' });
  t.is(res.status, 201);
  t.like(res.body, { status: 'success', message: 'Domain created successfully.' });
  const d = res.body.data;
  t.deepEqual(Object.keys(d), ['uuid', 'slug', 'domain', 'is_primary', 'is_active', 'tenant', 'created_at', 'modified_at']);
  t.like(d, { slug: 'www-example-com', domain: 'www.example.com', is_primary: false, is_active: true, tenant: site.uuid });
  for (const ref of ['www-example-com', 'www.example.com', d.uuid, d.uuid.toUpperCase()]) {
    const got = await s.api('GET', `${base(site)}${ref}/`, { token: owner.token });
    t.is(got.status, 200, ref);
    t.deepEqual(got.body, d);
  }
  t.deepEqual((await s.api('GET', `/api/sites/${site.slug}/domains/www-example-com/`, { token: owner.token })).body, d, 'alias');
  // Another site's domain is not reachable through this site.
  const other = await newSite();
  t.is((await s.api('GET', `${base(other)}www-example-com/`, { token: owner.token })).status, 404);
  t.is((await s.api('GET', `${base(site)}nope/`, { token: owner.token })).status, 404);
});

test('host names: malformed, platform hosts and duplicates (across sites) are 400 on domain; twin slugs get -2', async (t) => {
  const site = await newSite();
  const other = await newSite();
  await add(site, { domain: 'dup.example.com' });
  for (const domain of ['dup.example.com', 'DUP.example.com', 'x..y', 'a.example.com.', 'a.example.com:8080', 'https://a.example.com', 'a/b', '', 'localhost', 'ünï.com', 'x'.repeat(254)]) {
    const res = await add(other, { domain });
    t.is(res.status, 400, domain);
    t.truthy(res.body.errors.domain, domain);
  }
  t.deepEqual((await add(other, { domain: 'dup.example.com' })).body.errors, { domain: ['A domain with this host name already exists.'] });
  t.is((await add(other, { domain: 'ok.example.com', extra: 1 })).status, 400);
  t.is((await add(other, {})).status, 400);
  const a = await add(site, { domain: 'a-b.example.com' });
  const b = await add(other, { domain: 'a.b-example.com' });
  t.is(a.body.data.slug, 'a-b-example-com');
  t.is(b.body.data.slug, 'a-b-example-com-2');
});

test('list: default ordering -is_primary,domain, filters is_active (default true), is_primary, search; paginated', async (t) => {
  const site = await newSite();
  for (const domain of ['b.example.net', 'c.example.net', 'a.example.net']) await add(site, { domain });
  await add(site, { domain: 'off.example.net', is_active: false });
  const list = async (query = '') => (await s.api('GET', `${base(site)}${query}`, { token: owner.token })).body;
  const hosts = async (query = '') => (await list(query)).results.map((d: { domain: string }) => d.domain);
  t.deepEqual(await hosts(), [site.primary_domain, 'a.example.net', 'b.example.net', 'c.example.net']);
  t.deepEqual(await hosts('?is_active=false'), ['off.example.net']);
  t.deepEqual(await hosts('?is_active=all&is_primary=false&ordering=-domain'), ['off.example.net', 'c.example.net', 'b.example.net', 'a.example.net']);
  t.deepEqual(await hosts('?is_primary=true'), [site.primary_domain]);
  t.deepEqual(await hosts('?search=B.EXAMPLE'), ['b.example.net']);
  const page = await list('?page_size=3&page=2');
  t.is(page.count, 4);
  t.is(page.results.length, 1);
  t.truthy(page.previous);
  t.is((await s.api('GET', `${base(site)}?ordering=slugx`, { token: owner.token })).status, 400);
});

test('permissions: view_site reads, manage_site changes; no grant is 404', async (t) => {
  const site = await newSite();
  t.is((await s.api('GET', base(site), { token: viewer.token })).status, 404);
  await grantSite(s, viewer.uuid, site.uuid, ['view_site', 'change_site']);
  t.is((await s.api('GET', base(site), { token: viewer.token })).status, 200);
  t.is((await add(site, { domain: 'nope.example.com' }, viewer.token)).status, 403);
  t.is((await s.api('PATCH', `${base(site)}${site.primary_domain}/`, { token: viewer.token, body: { is_active: false } })).status, 403);
  t.is((await s.api('DELETE', `${base(site)}${site.primary_domain}/`, { token: viewer.token })).status, 403);
  await grantSite(s, viewer.uuid, site.uuid, ['manage_site']);
  t.is((await add(site, { domain: 'yes.example.com' }, viewer.token)).status, 201);
});

test('is_primary: create, PUT and PATCH move the primary; unsetting the primary or deleting it is a 400', async (t) => {
  const site = await newSite();
  const first = site.primary_domain;
  const created = await add(site, { domain: 'p1.example.com', is_primary: true });
  t.true(created.body.data.is_primary);
  t.deepEqual(await primaries(site), ['p1.example.com']);
  await add(site, { domain: 'p2.example.com' });
  const put = await s.api('PUT', `${base(site)}p2-example-com/`, { token: owner.token, body: { domain: 'p2.example.com', is_primary: true } });
  t.is(put.status, 200);
  t.deepEqual(await primaries(site), ['p2.example.com']);
  const patch = await s.api('PATCH', `${base(site)}${first}/`, { token: owner.token, body: { is_primary: true } });
  t.true(patch.body.is_primary);
  t.deepEqual(await primaries(site), [first]);
  const unset = await s.api('PATCH', `${base(site)}${first}/`, { token: owner.token, body: { is_primary: false } });
  t.is(unset.status, 400);
  t.truthy(unset.body.errors.is_primary);
  const del = await s.api('DELETE', `${base(site)}${first}/`, { token: owner.token });
  t.is(del.status, 400);
  t.is(del.body.code, 'BAD_REQUEST');
  t.deepEqual(await primaries(site), [first]);
  const ok = await s.api('DELETE', `${base(site)}p1.example.com/`, { token: owner.token });
  t.deepEqual(ok.body, { status: 'success', message: 'Domain deleted successfully.' });
  t.is((await s.api('GET', `${base(site)}p1.example.com/`, { token: owner.token })).status, 404);
});

test('PUT needs domain; a new host gets a new slug; PATCH is partial', async (t) => {
  const site = await newSite();
  await add(site, { domain: 'old.example.com' });
  const noDomain = await s.api('PUT', `${base(site)}old.example.com/`, { token: owner.token, body: { is_active: false } });
  t.deepEqual(noDomain.body.errors, { domain: ['This field is required.'] });
  const put = await s.api('PUT', `${base(site)}old.example.com/`, { token: owner.token, body: { domain: 'New.Example.com', is_active: true } });
  t.like(put.body, { domain: 'new.example.com', slug: 'new-example-com', is_active: true, is_primary: false });
  const patch = await s.api('PATCH', `${base(site)}new-example-com/`, { token: owner.token, body: { is_active: false } });
  t.like(patch.body, { domain: 'new.example.com', is_active: false });
  t.true(patch.body.modified_at > put.body.modified_at || patch.body.modified_at === put.body.modified_at);
  const clash = await s.api('PATCH', `${base(site)}new-example-com/`, { token: owner.token, body: { domain: site.primary_domain } });
  t.is(clash.status, 400);
  t.truthy(clash.body.errors.domain);
});

test('many parallel "make primary" requests on different domains of one site leave exactly one primary', async (t) => {
  const site = await newSite();
  const hosts = Array.from({ length: 10 }, (_, i) => `race${i}.example.com`);
  for (const domain of hosts) await add(site, { domain });
  for (let round = 0; round < 3; round++) {
    const results = await Promise.all(
      [...hosts, site.primary_domain].map((h) => s.api('PATCH', `${base(site)}${h}/`, { token: owner.token, body: { is_primary: true } })),
    );
    t.true(results.every((r) => r.status === 200), results.map((r) => r.text).join('\n'));
    t.is((await primaries(site)).length, 1);
  }
  const creates = await Promise.all(Array.from({ length: 6 }, (_, i) => add(site, { domain: `burst${i}.example.com`, is_primary: true })));
  t.true(creates.every((r) => r.status === 201));
  t.is((await primaries(site)).length, 1);
});
