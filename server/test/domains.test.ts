// Domains of a site: list (filters, default ordering), create, get by slug / host / UUID,
// PUT, PATCH, delete; host-name checks; the one-primary rule under concurrent requests; who owns
// a name (the platform under its base domain, a customer by a DNS TXT record read from a DNS
// stand-in) and what an unverified domain may not do.
import test from 'ava';
import { startDnsStandIn, type DnsStandIn } from '../../shared/testing/dns.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { grantSite, makeOrg, makeUser, sql, verifyDomain, type TestUser } from './site-fixtures.ts';

let s: TestServer;
let dns: DnsStandIn;
let root: string;
let owner: TestUser;
let viewer: TestUser;

test.before(async () => {
  dns = await startDnsStandIn();
  // Its tests make sites of one organization at once: not a test of the long-operation limit (docs/operations.md).
  s = await startTestServer({ DNS_SERVERS: dns.server, LONG_OPERATIONS_PER_SITE: '100', LONG_OPERATIONS_TOTAL: '100' });
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'owner');
  viewer = await makeUser(s, root, 'viewer');
  await makeOrg(s, 'acme', [{ uuid: owner.uuid, owner: true }]);
});
test.after.always(async () => {
  await s?.close();
  await dns?.close();
});

let n = 0;
async function newSite(): Promise<any> {
  const res = await s.api('POST', '/api/cloud/organizations/acme/sites/', { token: owner.token, body: { name: `Site ${++n}` } });
  if (res.status !== 201) throw new Error(res.text);
  return res.body.data;
}
const base = (site: { slug: string }) => `/api/cloud/sites/${site.slug}/domains/`;
const add = (site: { slug: string }, body: Record<string, unknown>, token = owner.token) => s.api('POST', base(site), { token, body });
const verify = (site: { slug: string }, host: string) => verifyDomain(s, dns, owner.token, site.slug, host);
const primaries = async (site: { uuid: string }) =>
  (await sql(s, 'SELECT domain FROM public.domains WHERE site_uuid = ? AND is_primary', [site.uuid])).map((r) => r.domain);

test('create: 201 envelope with the domain fields; lowercased; slug with hyphens; readable by slug, host and UUID', async (t) => {
  const site = await newSite();
  const res = await add(site, { domain: 'WWW.Example.com' });
  t.is(res.status, 201);
  t.like(res.body, { status: 'success', message: 'Domain created successfully.' });
  const d = res.body.data;
  t.deepEqual(Object.keys(d), ['uuid', 'slug', 'domain', 'is_primary', 'is_active', 'tenant', 'created_at', 'modified_at', 'is_verified', 'verified_at', 'verification']);
  t.like(d, { slug: 'www-example-com', domain: 'www.example.com', is_primary: false, is_active: true, tenant: site.uuid, is_verified: false, verified_at: null });
  t.is(d.verification.type, 'TXT');
  t.is(d.verification.name, '_platform-challenge.www.example.com');
  t.regex(d.verification.value, /^platform-verify=[0-9a-f]{32}$/);
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
  const verifyAs = () => s.api('POST', `${base(site)}${site.primary_domain}/verify/`, { token: viewer.token });
  t.is((await verifyAs()).status, 403, 'verify is a change: view_site is not enough');
  await grantSite(s, viewer.uuid, site.uuid, ['manage_site']);
  t.is((await add(site, { domain: 'yes.example.com' }, viewer.token)).status, 201);
  t.is((await verifyAs()).status, 200, 'the platform name needs no record');
  // Demoted: manage_site taken back; the next verify is refused at once.
  await sql(s, `DELETE FROM public.object_permissions WHERE user_uuid = ? AND object_uuid = ? AND permission_id = (SELECT id FROM public.permissions WHERE codename = 'manage_site')`, [viewer.uuid, site.uuid]);
  t.is((await verifyAs()).status, 403);
});

test('is_primary: create, PUT and PATCH move the primary (verified domains); unsetting the primary or deleting it is a 400', async (t) => {
  const site = await newSite();
  const first = site.primary_domain;
  await add(site, { domain: 'p1.example.com' });
  await add(site, { domain: 'p2.example.com' });
  await verify(site, 'p1.example.com');
  await verify(site, 'p2.example.com');
  const patch = await s.api('PATCH', `${base(site)}p1.example.com/`, { token: owner.token, body: { is_primary: true } });
  t.true(patch.body.is_primary, patch.text);
  t.deepEqual(await primaries(site), ['p1.example.com']);
  const put = await s.api('PUT', `${base(site)}p2-example-com/`, { token: owner.token, body: { domain: 'p2.example.com', is_primary: true } });
  t.is(put.status, 200);
  t.deepEqual(await primaries(site), ['p2.example.com']);
  // The site's own platform name, deleted and added again as primary (it needs no proof).
  t.is((await s.api('DELETE', `${base(site)}${first}/`, { token: owner.token })).status, 200);
  const created = await add(site, { domain: first, is_primary: true });
  t.is(created.status, 201, created.text);
  t.like(created.body.data, { is_primary: true, is_verified: true, verification: null });
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
  for (const domain of hosts) {
    await add(site, { domain });
    await verify(site, domain);
  }
  for (let round = 0; round < 3; round++) {
    const results = await Promise.all(
      [...hosts, site.primary_domain].map((h) => s.api('PATCH', `${base(site)}${h}/`, { token: owner.token, body: { is_primary: true } })),
    );
    t.true(results.every((r) => r.status === 200), results.map((r) => r.text).join('\n'));
    t.is((await primaries(site)).length, 1);
  }
  const creates = await Promise.all(Array.from({ length: 6 }, (_, i) => add(site, { domain: `burst${i}.example.com` })));
  t.true(creates.every((r) => r.status === 201));
  t.is((await primaries(site)).length, 1);
});

test('issue 29 #8: names under the base domain are the platform\'s: claiming dev-futuresite.<base> or login.<base> is 400 naming the rule, nothing stored; the later site gets its own name (no -2)', async (t) => {
  const squatter = await newSite();
  const stored = async () => (await sql(s, `SELECT count(*)::int AS n FROM public.domains WHERE domain LIKE '%futuresite%' OR domain IN ('login.localhost', 'localhost')`))[0].n;
  for (const domain of ['futuresite.localhost', 'dev-futuresite.localhost', 'login.localhost', 'LOGIN.localhost', 'a.b.localhost', 'localhost']) {
    const res = await add(squatter, { domain });
    t.is(res.status, 400, domain);
    t.truthy(res.body.errors.domain, domain);
  }
  t.regex((await add(squatter, { domain: 'login.localhost' })).body.errors.domain[0], /Names under localhost are assigned by the platform: this site's own is site-\d+\.localhost/);
  const renamed = await s.api('PATCH', `${base(squatter)}${squatter.primary_domain}/`, { token: owner.token, body: { domain: 'futuresite.localhost' } });
  t.is(renamed.status, 400, 'nor by renaming a domain');
  const viaCreate = await s.api('POST', '/api/cloud/organizations/acme/sites/', { token: owner.token, body: { name: 'Phisher', domain: 'login.localhost' } });
  t.is(viaCreate.status, 400, 'nor on site create');
  t.truthy(viaCreate.body.errors.domain);
  t.is((await sql(s, `SELECT count(*)::int AS n FROM public.sites WHERE name = 'Phisher'`))[0].n, 0);
  t.is(await stored(), 0, 'nothing stored');
  const later = await s.api('POST', '/api/cloud/organizations/acme/sites/', { token: owner.token, body: { name: 'Futuresite' } });
  t.is(later.status, 201, later.text);
  t.is(later.body.data.primary_domain, 'futuresite.localhost', 'its own name, no -2');
});

test('issue 29 #8: an unverified domain cannot be primary; a forged TXT value does not verify; the genuine one does', async (t) => {
  const site = await newSite();
  const refused = await add(site, { domain: 'shop.example.org', is_primary: true });
  t.is(refused.status, 400);
  t.regex(refused.body.errors.is_primary[0], /unverified domain cannot be primary/);
  t.is((await sql(s, `SELECT count(*)::int AS n FROM public.domains WHERE domain = 'shop.example.org'`))[0].n, 0, 'nothing stored');
  const made = (await add(site, { domain: 'shop.example.org' })).body.data;
  const primary = await s.api('PATCH', `${base(site)}shop.example.org/`, { token: owner.token, body: { is_primary: true } });
  t.is(primary.status, 400);
  t.deepEqual(await primaries(site), [site.primary_domain]);
  const verifyIt = () => s.api('POST', `${base(site)}shop.example.org/verify/`, { token: owner.token });
  t.regex((await verifyIt()).body.message, /not verified: no TXT record "platform-verify=[0-9a-f]{32}" at _platform-challenge\.shop\.example\.org/, 'no record at all');
  dns.setTxt(made.verification.name, ['platform-verify=0123456789abcdef0123456789abcdef', `${made.verification.value}x`, 'v=spf1 -all']);
  const forged = await verifyIt();
  t.is(forged.status, 400, 'a forged or near value does not verify');
  t.is((await sql(s, `SELECT verified_at FROM public.domains WHERE domain = 'shop.example.org'`))[0].verified_at, null);
  t.is((await s.api('POST', `${base(site)}shop.example.org/verify/`, { token: viewer.token })).status, 404, 'a stranger sees no site');
  dns.setTxt(made.verification.name, ['v=spf1 -all', made.verification.value]);
  const ok = await verifyIt();
  t.is(ok.status, 200, ok.text);
  t.like(ok.body, { domain: 'shop.example.org', is_verified: true, verification: made.verification });
  t.is((await s.api('PATCH', `${base(site)}shop.example.org/`, { token: owner.token, body: { is_primary: true } })).status, 200);
  t.deepEqual(await primaries(site), ['shop.example.org']);
  // A verified primary cannot be renamed to a name that is not verified.
  const moved = await s.api('PATCH', `${base(site)}shop.example.org/`, { token: owner.token, body: { domain: 'other.example.org' } });
  t.is(moved.status, 400);
  t.truthy(moved.body.errors.domain);
});
