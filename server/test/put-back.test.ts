// GET, change one field, PUT (or PATCH) the whole body back: it works on every platform
// resource; a read-only field sent with another value is a 400 naming it and changes nothing.
import test from 'ava';
import { READ_ONLY_MESSAGE } from '../../shared/common/read-only.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { makeOrg, makeUser } from './org-helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let root: string;
test.before(async () => {
  s = await startTestServer();
  root = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

/** GET, change `field`, send it back with `method`; then the same body with `readOnly` changed must be refused. */
async function roundTrip(t: any, path: string, token: string, field: string, value: unknown, readOnly: [string, unknown], method = 'PUT', host?: string) {
  const got = await s.api('GET', path, { token, host });
  t.is(got.status, 200, `${path}: ${got.text}`);
  const sent = await s.api(method, path, { token, host, body: { ...got.body, [field]: value } });
  t.is(sent.status, 200, `${method} ${path}: ${sent.text}`);
  t.deepEqual(sent.body[field] ?? sent.body.data?.[field], value, path);
  const bad = await s.api(method, path, { token, host, body: { ...got.body, [readOnly[0]]: readOnly[1] } });
  t.is(bad.status, 400, `${path}: ${bad.text}`);
  t.deepEqual(bad.body.errors, { [readOnly[0]]: [READ_ONLY_MESSAGE] });
  const after = await s.api('GET', path, { token, host });
  t.deepEqual(after.body[readOnly[0]], got.body[readOnly[0]], 'nothing changed');
  const unknown = await s.api(method, path, { token, host, body: { ...got.body, no_such_field: 1 } });
  t.is(unknown.status, 400);
  t.deepEqual(unknown.body.errors, { no_such_field: ['Unknown field.'] });
}

test('organizations, sites, domains and groups', async (t) => {
  const owner = await makeUser(s, root, 'pb');
  const org = await makeOrg(s, owner.access, 'Put Back');
  await roundTrip(t, `/api/cloud/organizations/${org.slug}/`, owner.access, 'name', 'Put Back Renamed', ['created', '2001-01-01T00:00:00Z']);
  const site = (await s.api('POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: owner.access, body: { name: 'Put Back Site' } })).body.data;
  for (const method of ['PUT', 'PATCH']) {
    await roundTrip(t, `/api/cloud/sites/${site.slug}/`, owner.access, 'description', `via ${method}`, ['schema_name', 'elsewhere'], method);
  }
  const domain = (await s.api('POST', `/api/cloud/sites/${site.slug}/domains/`, { token: owner.access, body: { domain: 'put-back.example.org' } })).body.data;
  for (const method of ['PUT', 'PATCH']) {
    await roundTrip(t, `/api/cloud/sites/${site.slug}/domains/${domain.uuid}/`, owner.access, 'is_active', method === 'PATCH', ['tenant', crypto.randomUUID()], method);
  }
  const group = (await s.api('POST', '/api/cloud/groups/', { token: root, body: { name: 'Put Back Group' } })).body.data;
  await roundTrip(t, `/api/cloud/groups/${group.id}/`, root, 'permissions', ['view_site'], ['id', group.id + 1000]);
});

test('site users and the site profile', async (t) => {
  const tok: Record<string, string> = {};
  const { a } = await twoSitesWithUsers(s, tok);
  await roundTrip(t, '/api/users/pleb/', tok.adminA, 'first_name', 'Plebeian', ['platform_user_uuid', crypto.randomUUID()], 'PUT', a.domain);
  await roundTrip(t, '/api/profile/', tok.pleb, 'last_name', 'Self', ['date_joined', '2001-01-01T00:00:00Z'], 'PUT', a.domain);
});
