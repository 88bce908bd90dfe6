// GET, edit one field, PUT (or PATCH) back, over HTTP, for apps, app settings, data sources,
// data tables, secret types and secrets: the fields GET returns are accepted back (read-only
// ones ignored when unchanged), a changed read-only field is a 400 naming it, unknown fields
// stay refused, a masked secret value sent back leaves the value alone, and another site's
// user reaches nothing.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const RO = 'This field is read-only and cannot be changed.';
const onA = (method: string, p: string, body?: unknown) => s.api(method, p, { host: a.domain, token: tok.adminA, body });
const onB = (method: string, p: string, body?: unknown) => s.api(method, p, { host: b.domain, token: tok.adminB, body });

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await onA('POST', '/api/apps/', { name: 'Edit' });
  await onA('POST', '/api/apps/edit/datasources/', { name: 'Main', provider_type: 'jsonb' });
  await onA('POST', '/api/apps/edit/datasources/main/datatables/', { name: 'notes', json_schema: { fields: [{ name: 'body', type: 'string' }] } });
  await onA('POST', '/api/secret-types/', { name: 'Token', json_schema: { type: 'string' } });
  await onA('POST', '/api/secrets/', { key: 'API_KEY', value: 'sk-1', secret_type: 'token', app: 'edit' });
});
test.after.always(async () => {
  await s?.close();
});

/** [path, how GET's body gives the resource, methods, the field to change, a read-only field to change]. */
const RESOURCES: [string, (body: any) => any, string[], [string, unknown], [string, unknown]][] = [
  ['/api/apps/edit/', (x) => x.data, ['PUT', 'PATCH'], ['description', 'Edited'], ['slug', 'other']],
  ['/api/apps/edit/settings/', (x) => x.data, ['PUT', 'PATCH'], ['primary_color', '#000000'], ['created_at', '2020-01-01T00:00:00.000Z']],
  ['/api/apps/edit/datasources/main/', (x) => x, ['PUT', 'PATCH'], ['description', 'Edited'], ['provider_type', 'docstore']],
  ['/api/apps/edit/datatables/notes/', (x) => x, ['PUT', 'PATCH'], ['description', 'Edited'], ['name', 'renamed']],
  ['/api/secret-types/token/', (x) => x, ['PUT'], ['description', 'Edited'], ['slug', 'other']],
  ['/api/secrets/API_KEY/?app=edit', (x) => x, ['PUT'], ['description', 'Edited'], ['app', 'other']],
];

for (const [path, pick, methods, [field, value], [roField, roValue]] of RESOURCES) {
  for (const method of methods) {
    test.serial(`${method} ${path}: GET, change ${field}, send back`, async (t) => {
      const got = pick((await onA('GET', path)).body);
      const res = await onA(method, path, { ...got, [field]: value });
      t.is(res.status, 200, res.text);
      const after = pick((await onA('GET', path)).body);
      t.is(after[field], value);
      const ro = await onA(method, path, { ...after, [roField]: roValue });
      t.is(ro.status, 400, ro.text);
      t.deepEqual(ro.body.errors, { [roField]: [RO] });
      const unknown = await onA(method, path, { ...after, bogus: 1, constructor: 2 });
      t.is(unknown.status, 400);
      t.deepEqual(unknown.body.errors, { bogus: ['Unknown field.'], constructor: ['Unknown field.'] });
      t.is((await onB(method, path, after)).status, 404, 'another site');
      t.deepEqual(pick((await onA('GET', path)).body), after, 'the refused requests changed nothing');
    });
  }
}

test.serial('secrets: the masked value sent back leaves the value unchanged; app PUT leaves settings alone', async (t) => {
  for (const mask of ['********', '***HIDDEN***']) {
    const res = await onA('PUT', '/api/secrets/API_KEY/?app=edit', { value: mask, description: mask });
    t.is(res.status, 200, res.text);
    t.is(res.body.value, '********');
    t.is((await onA('GET', '/api/secrets/API_KEY/?app=edit')).body.value, 'sk-1');
  }
  // App PUT never changes settings (their own route does): a changed copy sent along is ignored, as are counts and timestamps.
  const app = (await onA('GET', '/api/apps/edit/')).body.data;
  const changed = await onA('PUT', '/api/apps/edit/', { ...app, settings: { ...app.settings, display_name: 'Other' }, table_count: 99, updated_at: '2001-01-01T00:00:00Z' });
  t.is(changed.status, 200, changed.text);
  t.is((await onA('GET', '/api/apps/edit/settings/')).body.data.display_name, 'Edit');
  t.is((await onA('GET', '/api/apps/edit/')).body.data.table_count, app.table_count);
});
