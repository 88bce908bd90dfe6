// Host routing of sites made through the API: the primary domain and /sites/{schema}/ reach
// the site (probe: the tenant-scoped GET /api/cloud/sites/config/); a customer domain routes
// only once verified (its DNS TXT record, from a DNS stand-in); deactivating a site or a
// domain takes it off until reactivated; deleting a site removes its schema and its hosts;
// grants on one site give nothing on another.
import test from 'ava';
import { startDnsStandIn, type DnsStandIn } from '../../shared/testing/dns.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { FIXTURE_PASSWORD, grantSite, makeOrg, makeUser, schemaExists, sql, verifyDomain, type TestUser } from './site-fixtures.ts';

let s: TestServer;
let dns: DnsStandIn;
let root: string;
let owner: TestUser;

test.before(async () => {
  dns = await startDnsStandIn();
  s = await startTestServer({ DNS_SERVERS: dns.server });
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'owner');
  await makeOrg(s, 'acme', [{ uuid: owner.uuid, owner: true }]);
});
test.after.always(async () => {
  await s?.close();
  await dns?.close();
});

async function newSite(name: string): Promise<any> {
  const res = await s.api('POST', '/api/cloud/organizations/acme/sites/', { token: owner.token, body: { name } });
  if (res.status !== 201) throw new Error(res.text);
  return res.body.data;
}
const config = (host: string) => s.api('GET', '/api/cloud/sites/config/', { host });
const bySchema = (schema: string) => s.api('GET', `/sites/${schema}/api/cloud/sites/config/`);

/** Routing changes reach the cache by NOTIFY after commit: poll until the status is as expected. */
async function eventually(probe: () => Promise<{ status: number }>, status: number): Promise<number> {
  let last = 0;
  for (let i = 0; i < 50; i++) {
    last = (await probe()).status;
    if (last === status) return last;
    await new Promise((r) => setTimeout(r, 20));
  }
  return last;
}

test('a created site answers on its primary domain and under /sites/{schema_name}/', async (t) => {
  const site = await newSite('Routed');
  const res = await config(site.primary_domain);
  t.is(res.status, 200);
  t.deepEqual(res.body, site);
  t.false('password' in res.body);
  t.deepEqual((await config(`${site.primary_domain}:8443`)).body, site, 'the port is ignored');
  t.deepEqual((await bySchema(site.schema_name)).body, site);
  t.is((await s.api('GET', '/api/sites/config/', { host: site.primary_domain })).status, 200, 'alias');
  // The probe is tenant-only; platform routes are not served on a site host.
  t.is((await s.api('GET', '/api/cloud/sites/config/')).status, 404);
  t.is((await s.api('GET', '/api/cloud/sites/', { host: site.primary_domain, token: root })).status, 404);
  // A further domain routes too, once verified.
  await s.api('POST', `/api/cloud/sites/${site.slug}/domains/`, { token: owner.token, body: { domain: 'routed.example.com' } });
  await verifyDomain(s, dns, owner.token, site.slug, 'routed.example.com');
  t.is(await eventually(() => config('routed.example.com'), 200), 200);
});

test('a deactivated site answers 404 on its hosts until it is reactivated', async (t) => {
  const site = await newSite('Sleepy');
  t.is((await config(site.primary_domain)).status, 200);
  await s.api('PATCH', `/api/cloud/sites/${site.slug}/`, { token: owner.token, body: { is_active: false } });
  t.is(await eventually(() => config(site.primary_domain), 404), 404);
  t.is(await eventually(() => bySchema(site.schema_name), 404), 404);
  t.is((await s.api('GET', `/api/cloud/sites/${site.slug}/`, { token: owner.token })).status, 200, 'still managed on the platform');
  await s.api('PATCH', `/api/cloud/sites/${site.slug}/`, { token: owner.token, body: { is_active: true } });
  t.is(await eventually(() => config(site.primary_domain), 200), 200);
  t.is(await eventually(() => bySchema(site.schema_name), 200), 200);
});

test('a deactivated domain answers 404 until reactivated; the other domains keep serving', async (t) => {
  const site = await newSite('Partly');
  await s.api('POST', `/api/cloud/sites/${site.slug}/domains/`, { token: owner.token, body: { domain: 'partly.example.com' } });
  await verifyDomain(s, dns, owner.token, site.slug, 'partly.example.com');
  t.is(await eventually(() => config('partly.example.com'), 200), 200);
  await s.api('PATCH', `/api/cloud/sites/${site.slug}/domains/partly.example.com/`, { token: owner.token, body: { is_active: false } });
  t.is(await eventually(() => config('partly.example.com'), 404), 404);
  t.is((await config(site.primary_domain)).status, 200);
  await s.api('PATCH', `/api/cloud/sites/${site.slug}/domains/partly.example.com/`, { token: owner.token, body: { is_active: true } });
  t.is(await eventually(() => config('partly.example.com'), 200), 200);
});

test("issue 29 #8: an unverified domain's Host header reaches no site; verified it does; when its record is gone a re-check stops it at once and the platform name is primary again", async (t) => {
  const site = await newSite('Claimed');
  const path = `/api/cloud/sites/${site.slug}/domains/`;
  const made = await s.api('POST', path, { token: owner.token, body: { domain: 'claimed.example.com' } });
  t.is(made.status, 201);
  t.false(made.body.data.is_verified);
  const unverified = await config('claimed.example.com');
  t.is(unverified.status, 404, 'routes nothing');
  const unknown = await config('nobody.example.com');
  t.deepEqual(unverified.body, { ...unknown.body, message: 'Unknown host "claimed.example.com".' }, 'answered like an unknown host');
  t.is((await s.api('POST', '/api/auth/jwt/token/', { host: 'claimed.example.com', body: { username: 'owner', password: FIXTURE_PASSWORD } })).status, 404, 'no sign-in through it');
  t.is((await s.api('PATCH', `${path}claimed.example.com/`, { token: owner.token, body: { is_active: true } })).status, 200);
  t.is((await config('claimed.example.com')).status, 404, 'active is not verified');

  await verifyDomain(s, dns, owner.token, site.slug, 'claimed.example.com');
  t.is(await eventually(() => config('claimed.example.com'), 200), 200);
  t.is((await s.api('PATCH', `${path}claimed.example.com/`, { token: owner.token, body: { is_primary: true } })).status, 200);
  t.is((await s.api('GET', `/api/cloud/sites/${site.slug}/`, { token: owner.token })).body.primary_domain, 'claimed.example.com');

  dns.setTxt(made.body.data.verification.name, ['platform-verify=someone-else']);
  const lost = await s.api('POST', `${path}claimed.example.com/verify/`, { token: owner.token });
  t.is(lost.status, 200, lost.text);
  t.like(lost.body, { is_verified: false, verified_at: null, is_primary: false });
  t.is((await config('claimed.example.com')).status, 404, 'stops routing at once');
  t.is((await s.api('GET', `/api/cloud/sites/${site.slug}/`, { token: owner.token })).body.primary_domain, site.primary_domain, 'the platform name is primary again');
  t.is((await config(site.primary_domain)).status, 200);
  const [row] = await sql(s, `SELECT count(*)::int AS n FROM public.domains WHERE site_uuid = ? AND is_primary AND verified_at IS NOT NULL`, [site.uuid]);
  t.is(row.n, 1);
});

test('a deleted site leaves no schema, and its hosts answer 404', async (t) => {
  const site = await newSite('Gone');
  t.is((await config(site.primary_domain)).status, 200);
  t.true(await schemaExists(s, site.schema_name));
  t.is((await s.api('DELETE', `/api/cloud/sites/${site.slug}/`, { token: owner.token })).status, 200);
  t.false(await schemaExists(s, site.schema_name));
  t.is(await eventually(() => config(site.primary_domain), 404), 404);
  t.is(await eventually(() => bySchema(site.schema_name), 404), 404);
});

test('isolation: grants on site A give nothing on site B (404 unseen, 403 seen without the permission)', async (t) => {
  const a = await newSite('Tenant A');
  const b = await newSite('Tenant B');
  const user = await makeUser(s, root, 'tenant-a-admin');
  await grantSite(s, user.uuid, a.uuid, ['view_site', 'change_site', 'delete_site', 'manage_site']);
  const as = (method: string, path: string, body?: unknown) => s.api(method, path, { token: user.token, body });
  t.is((await as('GET', `/api/cloud/sites/${a.slug}/`)).status, 200);
  t.is((await as('PATCH', `/api/cloud/sites/${a.slug}/`, { description: 'mine' })).status, 200);
  t.is((await as('POST', `/api/cloud/sites/${a.slug}/domains/`, { domain: 'a-extra.example.com' })).status, 201);
  for (const [method, path, body] of [
    ['GET', `/api/cloud/sites/${b.slug}/`],
    ['GET', `/api/cloud/sites/${b.uuid}/`],
    ['PATCH', `/api/cloud/sites/${b.slug}/`, { name: 'stolen' }],
    ['PUT', `/api/cloud/sites/${b.slug}/`, { name: 'stolen' }],
    ['DELETE', `/api/cloud/sites/${b.slug}/`],
    ['GET', `/api/cloud/sites/${b.slug}/privileges/`],
    ['GET', `/api/cloud/sites/${b.slug}/domains/`],
    ['POST', `/api/cloud/sites/${b.slug}/domains/`, { domain: 'b-stolen.example.com' }],
    ['PATCH', `/api/cloud/sites/${b.slug}/domains/${b.primary_domain}/`, { is_active: false }],
    ['GET', '/api/cloud/organizations/acme/sites/'],
    ['POST', '/api/cloud/organizations/acme/sites/', { name: 'Sneaky' }],
  ] as [string, string, unknown?][]) {
    t.is((await as(method, path, body)).status, 404, `${method} ${path}`);
  }
  const listed = (await as('GET', '/api/cloud/sites/')).body.results.map((r: { slug: string }) => r.slug);
  t.deepEqual(listed, [a.slug]);
  await grantSite(s, user.uuid, b.uuid, ['view_site']);
  t.is((await as('GET', `/api/cloud/sites/${b.slug}/`)).status, 200);
  t.is((await as('PATCH', `/api/cloud/sites/${b.slug}/`, { name: 'stolen' })).status, 403);
  t.is((await as('DELETE', `/api/cloud/sites/${b.slug}/`)).status, 403);
  t.is((await as('POST', `/api/cloud/sites/${b.slug}/domains/`, { domain: 'b-stolen.example.com' })).status, 403);
  const after = await s.api('GET', `/api/cloud/sites/${b.slug}/`, { token: owner.token });
  t.is(after.body.name, 'Tenant B');
  t.is((await config(b.primary_domain)).status, 200);
});

test('the seeded owner signs in on the new site with the platform password', async (t) => {
  const site = await newSite('Sign In');
  const res = await s.api('POST', '/api/auth/jwt/token/', { host: site.primary_domain, body: { username: 'owner', password: FIXTURE_PASSWORD } });
  t.is(res.status, 200, res.text);
  const profile = await s.api('GET', '/api/profile/', { host: site.primary_domain, token: res.body.access });
  t.is(profile.status, 200, profile.text);
  t.like(profile.body, { username: 'owner', is_superuser: true, is_staff: true });
  // The site token is not a platform token.
  t.is((await s.api('GET', '/api/cloud/sites/', { token: res.body.access })).status, 401);
});
