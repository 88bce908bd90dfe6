// Data writes answer without waiting for the caches (issue 33 items 2 and 3; RouteDef.writes = 'data'):
// safe only because they change nothing the process caches. Every such route is exercised here
// while a session LISTENs on the change channel, and none may notify a cache topic (the list
// of routes comes from the registry: a new data route fails this test until it is exercised
// here). The guarantee kept for metadata: a table's schema change is seen by the same client's
// next request.
import test from 'ava';
import pg from 'pg';
import { buildRegistry } from '../app.ts';
import { loadConfig } from '../../shared/config.ts';
import { CHANGES_CHANNEL } from '../../shared/db/changes.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { createTables, fixture, seedCrm } from './crm.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};
const on = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });
const T = '/api/apps/crm/datatables/companies/';
const ORG = '/api/apps/crm/datatables/org/';
const ORG_SCHEMA = { fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }], primaryKey: 'id', hierarchy: true };

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a]);
  await createTables((m, p, body) => on(m, p, body), [['main', 'companies', fixture('companies.json')], ['main', 'org', ORG_SCHEMA as never]]);
  const fn = await on('POST', '/api/apps/crm/functions/', { name: 'echo', code: 'export default (e) => e' });
  if (fn.status !== 201) throw new Error(fn.text);
});
test.after.always(async () => {
  await s?.close();
});

/** The routes declared as data writes (records, edges, function invocations), by operation id (without the `_by_app` twin). */
function dataWriteOperations(): string[] {
  const config = loadConfig({ PLATFORM_SECRET_KEY: 'x'.repeat(32), DATABASE_URL: 'postgres://localhost/unused' });
  const unused = {} as never;
  const registry = buildRegistry({ config, tokens: unused, mailer: unused, log: unused, store: unused, secrets: unused, functions: { events: unused } as never });
  return [...new Set(registry.routes.filter((r) => r.writes === 'data' && r.method !== 'get').map((r) => r.operationId.replace(/_by_app$/, '')))].sort();
}

test.serial('every data write (records, edges, function invocations) notifies no cache topic: answering without the marker is safe', async (t) => {
  const listener = new pg.Client({ connectionString: s.config.databaseUrl });
  await listener.connect();
  const heard: string[] = [];
  listener.on('notification', (n) => heard.push(n.payload ?? ''));
  await listener.query(`LISTEN ${CHANGES_CHANNEL}`);
  const exercised = new Set<string>();
  const call = async (operation: string, method: string, path: string, body?: unknown, ok = [200, 201, 204]) => {
    const r = await on(method, path, body);
    t.true(ok.includes(r.status), `${operation}: ${r.status} ${r.text.slice(0, 200)}`);
    exercised.add(operation);
    return r;
  };
  try {
    await call('records_create', 'POST', `${T}data/`, { id: 1, name: 'Acme' });
    await call('records_create', 'POST', `${T}data/`, [{ id: 2, name: 'Beta' }, { id: 3, name: 'Gamma' }]);
    await call('records_partial_update', 'PATCH', `${T}data/1/`, { employees: 5 });
    await call('records_partial_update_many', 'PATCH', `${T}data/`, [{ id: 2, employees: 6 }]);
    await call('records_upsert', 'POST', `${T}data/upsert/?unique_fields=id`, { id: 4, name: 'Delta' });
    const csv = await s.api('POST', `${T}data/import/`, { host: a.domain, token: tok.adminA, raw: Buffer.from('id,name\n5,Epsilon\n'), headers: { 'Content-Type': 'text/csv' } });
    t.is(csv.status, 200, csv.text);
    exercised.add('records_import_csv');
    await call('records_destroy', 'DELETE', `${T}data/5/`);
    await call('records_destroy_many', 'DELETE', `${T}data/?ids=3,4`);
    await call('records_create', 'POST', `${ORG}data/`, [{ id: 1, name: 'Ada' }, { id: 2, name: 'Bob' }]);
    const edges = await call('edges_create', 'POST', `${ORG}edges/`, [{ from_id: 2, to_id: 1, type: 'reports_to' }]);
    await call('edges_update', 'PATCH', `${ORG}edges/${edges.body.results[0].id}/`, { metadata: { since: 2020 } });
    await call('edges_destroy_many', 'DELETE', `${ORG}edges/`, { edge_ids: [edges.body.results[0].id] });
    await call('functions_invoke', 'POST', '/api/apps/crm/functions/echo/invoke/', { payload: 1 });
    await call('functions_invoke', 'POST', '/api/apps/crm/functions/echo/invoke/', { payload: 2, async: true }, [202]);
    // Anything notified arrives within a round trip of its commit: a marker of our own after them all.
    await listener.query(`SELECT pg_notify($1, 'test:end')`, [CHANGES_CHANNEL]);
    for (let i = 0; i < 50 && !heard.includes('test:end'); i++) await new Promise((r) => setTimeout(r, 20));
  } finally {
    await listener.end();
  }
  t.deepEqual(heard.filter((p) => p !== 'test:end' && !p.startsWith('function-jobs:')), [], 'no cache topic notified by a data write');
  t.deepEqual([...exercised].sort(), dataWriteOperations(), 'every route declared a data write is exercised here');
});

test.serial('a table\'s schema change is seen by the same client\'s next request (metadata writes still wait for the caches)', async (t) => {
  const schema = fixture('companies.json');
  schema.fields.push({ name: 'motto', type: 'string' });
  const changed = await on('PATCH', T, { json_schema: schema });
  t.is(changed.status, 200, changed.text);
  const created = await on('POST', `${T}data/`, { id: 10, name: 'Zeta', motto: 'first' });
  t.is(created.status, 201, created.text);
  t.is(created.body.data.motto, 'first');
});
