// Behind PgBouncer in transaction pooling mode (Debian's 1.18: no named statements across
// transactions, no startup parameters it does not know, no session state): two `platform serve`
// processes whose DATABASE_URL is the proxy and DATABASE_DIRECT_URL the database (migrations,
// LISTEN) run a representative workload through the proxy — sign-in, a site, an app with a data
// table, records written and read (a duration field: the interval style reaches the proxy's
// server connections), a schema change seen by the other process within a second, a function,
// an object stored and read back, a CSV export from a cursor — and the proxy's own counters show
// that the requests went through it (docs/operations.md "Behind PgBouncer").
import test from 'ava';
import { createTestDatabase, testServerUrl, type TestDatabase } from '../../shared/testing/database.ts';
import { pgbouncerMissing, startPgBouncer, type PgBouncer } from '../../shared/testing/pgbouncer.ts';
import { ADMIN, IN_CI, request, type ApiResponse, type RequestOptions } from './helpers.ts';
import { serveTwo, stopServed, within1s, type Served } from './processes.ts';

let db: TestDatabase;
let bouncer: PgBouncer;
let a: Served;
let b: Served;

// CI installs PgBouncer (.ci/run); elsewhere the file is skipped without it.
const run = pgbouncerMissing && !IN_CI ? test.skip : test.serial;

test.before(async () => {
  if (pgbouncerMissing && !IN_CI) return;
  db = await createTestDatabase();
  // Fewer server connections than the two processes' pools: transactions of both share them.
  bouncer = await startPgBouncer(testServerUrl(), { poolSize: 4 });
  ({ a, b } = await serveTwo(db, { DATABASE_URL: bouncer.url(db.url), DATABASE_DIRECT_URL: db.url, DATABASE_POOL_SIZE: '8' }));
});
test.after.always(async () => {
  await Promise.all([stopServed(a), stopServed(b)]);
  await bouncer?.close();
  await db?.drop();
});

const on = (s: Served, method: string, p: string, options?: RequestOptions) => request(s.url, method, p, options);
async function ok(res: Promise<ApiResponse>, status: number, what: string): Promise<ApiResponse> {
  const r = await res;
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${r.text}`);
  return r;
}
/** The proxy's count of transactions for the test database. */
const transactions = async () => Number((await bouncer.admin<{ database: string; total_xact_count: string }>('SHOW STATS')).find((r) => r.database === db.name)?.total_xact_count ?? 0);

run('through PgBouncer (transaction mode, 1.18): auth, sites, apps, tables, records, schema changes across processes, functions, storage and CSV export', async (t) => {
  const before = await transactions();
  const root = (await ok(on(a, 'POST', '/api/auth/jwt/token/', { body: { username: ADMIN.username, password: ADMIN.password } }), 200, 'login')).body.access;
  const org = (await ok(on(a, 'POST', '/api/cloud/organizations/', { token: root, body: { name: 'Bouncer' } }), 201, 'org')).body.data;
  const site = (await ok(on(b, 'POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: root, body: { name: 'Bouncer' } }), 201, 'site')).body.data;
  const api = (p: string) => `/sites/${site.schema_name}/api${p}`;
  const admin = (await ok(on(a, 'POST', `/api/cloud/sites/${site.schema_name}/token/`, { token: root }), 200, 'exchange')).body.access;
  const call = (s: Served, method: string, p: string, body?: unknown, status = method === 'POST' ? 201 : 200) => ok(on(s, method, api(p), { token: admin, body }), status, `${method} ${p}`);

  await call(a, 'POST', '/apps/', { name: 'crm' });
  await call(a, 'POST', '/apps/crm/datasources/', { name: 'main', provider_type: 'flat_table' });
  const fields = [{ name: 'id', type: 'integer' }, { name: 'n', type: 'string' }, { name: 'took', type: 'duration' }];
  await call(a, 'POST', '/apps/crm/datasources/main/datatables/', { name: 'things', json_schema: { fields, primaryKey: ['id'] } });
  await call(a, 'POST', '/apps/crm/datatables/things/materialize/', undefined, 200);

  // Records: written and read on both processes, over the proxy's shared server connections
  // (unnamed statements: a named one prepared on one server connection is unknown on the next).
  const data = '/apps/crm/datatables/things/data/';
  for (let i = 1; i <= 20; i++) await call(i % 2 ? a : b, 'POST', data, { id: i, n: `n${i}`, took: 'P1DT2H' });
  for (let i = 1; i <= 20; i++) t.deepEqual((await call(i % 2 ? b : a, 'GET', `${data}${i}/`)).body.data, { id: i, n: `n${i}`, took: 'P1DT2H' });
  await call(b, 'PATCH', `${data}3/`, { n: 'three' });
  t.is((await call(a, 'GET', `${data}3/`)).body.data.n, 'three');
  await call(a, 'DELETE', `${data}4/`, undefined, 204);
  await call(b, 'GET', `${data}4/`, undefined, 404);
  const page = (await call(b, 'GET', `${data}?page_size=5&_sort=id`)).body;
  t.is(page.total, 19);
  t.deepEqual(page.data.map((r: { id: number }) => r.id), [1, 2, 3, 5, 6]);
  const csv = await call(a, 'GET', `${data}?format=csv&_sort=id`);
  t.is(csv.text.trim().split(/\r?\n/).length, 20, 'a header and 19 rows, from a cursor');

  // A schema change made through A reaches B within a second (A's LISTEN/NOTIFY: direct connections).
  const record = () => on(b, 'GET', api(`${data}1/`), { token: admin });
  t.deepEqual((await record()).body.data, { id: 1, n: 'n1', took: 'P1DT2H' });
  await call(a, 'PATCH', '/apps/crm/datasources/main/datatables/things/', { json_schema: { fields: [...fields, { name: 'extra', type: 'string' }], primaryKey: ['id'] } });
  t.deepEqual((await within1s(record, (r) => r.body.data && 'extra' in r.body.data)).body.data, { id: 1, n: 'n1', took: 'P1DT2H', extra: null });

  // A function invocation and an object stored through one process, read through the other.
  await call(a, 'POST', '/apps/crm/functions/', { name: 'hello', code: 'export default (e) => ({ hello: e?.name ?? "world" })' });
  t.like((await call(b, 'POST', '/apps/crm/functions/hello/invoke/', { payload: { name: 'Ada' } }, 200)).body, { status: 'succeeded', result: { hello: 'Ada' } });
  await call(a, 'POST', '/apps/crm/storage/buckets/', { name: 'docs', app_category: 'attachments' });
  const bytes = Buffer.from('through the proxy');
  await ok(on(a, 'PUT', api('/apps/crm/storage/buckets/docs/objects/a/b.txt'), { token: admin, raw: bytes, headers: { 'Content-Type': 'text/plain' } }), 201, 'upload');
  t.deepEqual((await ok(on(b, 'GET', api('/apps/crm/storage/buckets/docs/objects/a/b.txt'), { token: admin }), 200, 'download')).bytes, bytes);

  // The requests went through the proxy: its transaction count for this database grew with them.
  t.true((await transactions()) - before >= 60, 'the proxy carried the requests');
  const errors = `${a.output().stdout}${b.output().stdout}`.split('\n').filter((l) => /"level":(50|60)/.test(l));
  t.deepEqual(errors, [], 'no error logged');
});
