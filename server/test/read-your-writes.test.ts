// Read-your-writes across processes: what a client changed through process A (a data table's
// schema, an app's settings, a user's deactivation) is what its very next request sees on process
// B — not within a second, at once — although the change notifications B receives arrive 200 ms
// late (a proxy in front of PostgreSQL holds them back). A answers a write that
// changed metadata once B has acknowledged it (shared/db/changes.ts: settled()).
import test from 'ava';
import { createTestDatabase, type TestDatabase } from '../../shared/testing/database.ts';
import { startDelayProxy, type DelayProxy } from '../../shared/testing/delay-proxy.ts';
import { ADMIN, request, type ApiResponse, type RequestOptions } from './helpers.ts';
import { serveTwo, stopServed, type Served } from './processes.ts';

let db: TestDatabase;
let proxy: DelayProxy;
let a: Served;
let b: Served;

test.before(async () => {
  db = await createTestDatabase();
  const { hostname, port } = new URL(db.url);
  proxy = await startDelayProxy({ host: hostname, port: Number(port) }, 200);
  ({ a, b } = await serveTwo(db, {}, { DATABASE_URL: proxy.url(db.url) }));
});
test.after.always(async () => {
  await Promise.all([stopServed(a), stopServed(b)]);
  await proxy?.close();
  await db?.drop();
});

const THINGS = { fields: [{ name: 'id', type: 'integer' }, { name: 'n', type: 'string' }], primaryKey: ['id'] };
/** B has heard of every change made so far (so that what it loads next, it keeps in its caches). */
const quiet = () => new Promise((resolve) => setTimeout(resolve, 600));
const on = (s: Served, method: string, p: string, options?: RequestOptions) => request(s.url, method, p, options);
async function ok(res: Promise<ApiResponse>, status: number, what: string): Promise<ApiResponse> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r;
}

test('a table schema, an app setting and a deactivation made through A are seen by the next request on B (whose notifications come 200 ms late)', async (t) => {
  const root = (await ok(on(a, 'POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: ADMIN.password } }), 200, 'login')).body.access;
  const org = (await ok(on(a, 'POST', '/api/cloud/organizations/', { token: root, body: { name: 'Ryw' } }), 201, 'org')).body.data;
  const site = (await ok(on(a, 'POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: root, body: { name: 'Ryw' } }), 201, 'site')).body.data;
  const api = (p: string) => `/sites/${site.schema_name}/api${p}`;
  const admin = (await ok(on(a, 'POST', `/api/cloud/sites/${site.schema_name}/token/`, { token: root }), 200, 'exchange')).body.access;
  const onA = (method: string, p: string, body?: unknown, status = method === 'POST' ? 201 : 200) => ok(on(a, method, api(p), { token: admin, body }), status, `A: ${method} ${p}`);
  await onA('POST', '/apps/', { name: 'crm' });
  await onA('POST', '/apps/crm/datasources/', { name: 'main', provider_type: 'flat_table' });
  await onA('POST', '/apps/crm/datasources/main/datatables/', { name: 'things', json_schema: THINGS });

  // The schema: B serves a record (the table's definition cached), A adds a field (a migration),
  // B's next answer has it.
  await onA('POST', '/apps/crm/datatables/things/materialize/', undefined, 200);
  await onA('POST', '/apps/crm/datatables/things/data/', { id: 1, n: 'one' });
  await quiet();
  const record = async () => (await ok(on(b, 'GET', api('/apps/crm/datatables/things/data/1/'), { token: admin }), 200, 'B: record')).body.data;
  for (let i = 0; i < 3; i++) t.deepEqual(await record(), { id: 1, n: 'one' });
  await onA('PATCH', '/apps/crm/datasources/main/datatables/things/', { json_schema: { ...THINGS, fields: [...THINGS.fields, { name: 'extra', type: 'string' }] } });
  t.deepEqual(await record(), { id: 1, n: 'one', extra: null }, 'B reads the table with the field A added, at once');

  // An app setting: B's rate limit header follows at once.
  const limit = async () => (await on(b, 'GET', api('/apps/crm/'), { token: admin })).headers.get('x-ratelimit-limit');
  await quiet();
  for (let i = 0; i < 3; i++) t.is(await limit(), '1000');
  await onA('PATCH', '/apps/crm/settings/', { rate_limit_per_hour: 77 });
  t.is(await limit(), '77', 'B uses the limit A set, at once');

  // A site user deactivated through A: B refuses its token at once.
  await onA('POST', '/users/', { username: 'ryw-user', password: 'a-long-enough-password-1' });
  const token = (await ok(on(a, 'POST', api('/auth/jwt/token/'), { body: { username: 'ryw-user', password: 'a-long-enough-password-1' } }), 200, 'user login')).body.access;
  const records = () => on(b, 'GET', api('/apps/crm/datatables/things/data/'), { token });
  await quiet();
  for (let i = 0; i < 3; i++) t.not((await records()).status, 401);
  await onA('PUT', '/users/ryw-user/', { is_active: false });
  t.is((await records()).status, 401, 'B refuses the deactivated user at once');
});
