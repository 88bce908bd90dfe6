// Creation quotas: organizations per owner and sites per organization, also under concurrent
// creates; operators are exempt. Creation counts against the write rate limit.
import test from 'ava';
import { startTestServer, type TestServer } from './helpers.ts';
import { makeOrg, makeUser, rows } from './org-helpers.ts';

let s: TestServer;
let root: string;
test.before(async () => {
  s = await startTestServer({ QUOTA_ORGANIZATIONS_PER_USER: '2', QUOTA_SITES_PER_ORGANIZATION: '2' });
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

test('an owner founds at most QUOTA_ORGANIZATIONS_PER_USER organizations, also in a burst of parallel creates', async (t) => {
  const u = await makeUser(s, root, 'founder');
  const results = await Promise.all(Array.from({ length: 5 }, (_, i) => s.api('POST', '/api/cloud/organizations/', { token: u.access, body: { name: `Burst ${i}` } })));
  t.deepEqual(results.map((r) => r.status).sort(), [201, 201, 422, 422, 422]);
  const refused = results.find((r) => r.status === 422)!;
  t.like(refused.body, { code: 'BUSINESS_LOGIC_ERROR', data: { limit: 2 } });
  t.regex(refused.body.message, /Quota reached: organizations owned per user \(at most 2\)/);
  const owned = await rows(s, 'SELECT 1 FROM public.organization_members WHERE user_uuid = ? AND is_owner', [u.uuid]);
  t.is(owned.length, 2);
  // Deleting one frees its place; the superuser is exempt.
  const slug = results.find((r) => r.status === 201)!.body.data.slug;
  t.is((await s.api('DELETE', `/api/cloud/organizations/${slug}/`, { token: u.access })).status, 200);
  t.is((await s.api('POST', '/api/cloud/organizations/', { token: u.access, body: { name: 'Again' } })).status, 201);
  for (let i = 0; i < 3; i++) t.is((await s.api('POST', '/api/cloud/organizations/', { token: root, body: { name: `Root ${i}` } })).status, 201);
});

test('an organization has at most QUOTA_SITES_PER_ORGANIZATION sites, also under parallel creates', async (t) => {
  const u = await makeUser(s, root, 'sites');
  const org = await makeOrg(s, u.access, 'Site Quota');
  const results = await Promise.all(Array.from({ length: 4 }, (_, i) => s.api('POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: u.access, body: { name: `Quota Site ${i}` } })));
  t.deepEqual(results.map((r) => r.status).sort(), [201, 201, 422, 422], results.map((r) => r.text).join('\n'));
  const sites = await rows(s, 'SELECT 1 FROM public.sites WHERE organization_uuid = ?', [org.uuid]);
  t.is(sites.length, 2);
  const schemas = await rows(s, `SELECT 1 FROM pg_namespace WHERE nspname LIKE 'quota_site_%'`);
  t.is(schemas.length, 2, 'a refused create leaves no schema');
  t.is((await s.api('POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: root, body: { name: 'By Root' } })).status, 201);
});

test('creation is rate-limited as a write', async (t) => {
  const limited = await startTestServer({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_WRITE_PER_MINUTE: '3', RATE_LIMIT_KEY_PREFIX: `rl-${crypto.randomUUID()}` });
  t.teardown(() => limited.close());
  const token = (await limited.login()).access;
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await limited.api('POST', '/api/cloud/organizations/', { token, body: { name: `Rated ${i}` } })).status);
  t.deepEqual(statuses, [201, 201, 201, 429]);
});
