// Data writes answer without waiting for the caches (issue 33 items 2, 3 and 4; RouteDef.writes = 'data'):
// safe only because they change nothing the process caches. Every such route is exercised here
// while a session LISTENs on the change channel, and none may notify a cache topic (the list
// of routes comes from the registry: a new data route fails this test until it is exercised
// here). The guarantee kept for metadata: a table's schema change is seen by the same client's
// next request.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
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
const storageDir = mkdtempSync(path.join(os.tmpdir(), 'data-writes-'));
const tok: Record<string, string> = {};
const on = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });
const T = '/api/apps/crm/datatables/companies/';
const ORG = '/api/apps/crm/datatables/org/';
const ORG_SCHEMA = { fields: [{ name: 'id', type: 'integer' }, { name: 'name', type: 'string' }], primaryKey: 'id', hierarchy: true };

test.before(async () => {
  s = await startTestServer({ STORAGE_DIR: storageDir });
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a]);
  await createTables((m, p, body) => on(m, p, body), [['main', 'companies', fixture('companies.json')], ['main', 'org', ORG_SCHEMA as never]]);
  for (const name of ['files', 'other']) expectCreated(await on('POST', '/api/apps/crm/storage/buckets/', { name, app_category: 'attachments' }));
  expectCreated(await on('POST', '/api/apps/crm/functions/', { name: 'echo', code: 'export default (e) => e' }));
});
test.after.always(async () => {
  await s?.close();
  rmSync(storageDir, { recursive: true, force: true });
});

function expectCreated(r: { status: number; text: string }): void {
  if (r.status !== 201) throw new Error(r.text);
}

/** The routes declared as data writes (records, edges, storage objects, function invocations), by operation id (without the `_by_app` twin). */
function dataWriteOperations(): string[] {
  const config = loadConfig({ PLATFORM_SECRET_KEY: 'x'.repeat(32), DATABASE_URL: 'postgres://localhost/unused' });
  const unused = {} as never;
  const registry = buildRegistry({ config, tokens: unused, mailer: unused, log: unused, store: unused, secrets: unused, functions: { events: unused } as never });
  return [...new Set(registry.routes.filter((r) => r.writes === 'data' && r.method !== 'get').map((r) => r.operationId.replace(/_by_app$/, '')))].sort();
}

test.serial('every data write (records, edges, storage objects, function invocations) notifies no cache topic: answering without the marker is safe', async (t) => {
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
    // Storage objects (no trigger on storage_objects; their buckets are metadata and wait).
    const O = '/api/apps/crm/storage/buckets/files/objects/';
    const raw = async (operation: string, method: string, key: string, data: string) => {
      const r = await s.api(method, `${O}${key}`, { host: a.domain, token: tok.adminA, raw: data, headers: { 'Content-Type': 'text/plain' } });
      t.true([200, 201].includes(r.status), `${operation}: ${r.status} ${r.text.slice(0, 200)}`);
      exercised.add(operation);
    };
    const form = async (operation: string, path: string, parts: [string, string | Blob, string?][]) => {
      const body = new FormData();
      for (const [name, value, filename] of parts) (typeof value === 'string' ? body.append(name, value) : body.append(name, value, filename));
      const encoded = new Response(body);
      const r = await s.api('POST', `${O}${path}`, { host: a.domain, token: tok.adminA, raw: Buffer.from(await encoded.arrayBuffer()), headers: { 'Content-Type': encoded.headers.get('content-type')! } });
      t.true([200, 201].includes(r.status), `${operation}: ${r.status} ${r.text.slice(0, 200)}`);
      exercised.add(operation);
    };
    await raw('storage_objects_upload_put', 'PUT', 'a.txt', 'one');
    await raw('storage_objects_upload_put', 'PUT', 'a.txt', 'one again');
    await raw('storage_objects_upload_post', 'POST', 'b.txt', 'two');
    await form('storage_objects_create', '', [['file', new Blob(['three']), 'c.txt']]);
    await form('storage_objects_batch_upload', 'batch-upload/', [['files', new Blob(['four']), 'd.txt'], ['files', new Blob(['five']), 'e.txt']]);
    await call('storage_objects_partial_update', 'PATCH', `${O}a.txt/`, { metadata: { tag: 'x' } });
    await call('storage_objects_copy', 'POST', `${O}copy/`, { source_path: 'a.txt', destination_bucket: 'other', destination_path: 'a.txt' });
    await call('storage_objects_move', 'POST', `${O}move/`, { source_path: 'b.txt', destination_path: 'moved/b.txt' });
    await call('storage_objects_search', 'POST', `${O}search/`, { prefix: 'moved/' });
    await call('storage_objects_destroy', 'DELETE', `${O}c.txt`);
    await call('storage_objects_batch_delete', 'POST', `${O}batch-delete/`, { paths: ['d.txt', 'e.txt'] });
    await call('functions_invoke', 'POST', '/api/apps/crm/functions/echo/invoke/', { payload: 1 });
    await call('functions_invoke', 'POST', '/api/apps/crm/functions/echo/invoke/', { payload: 2, async: true }, [202]);
    // Anything notified arrives within a round trip of its commit: a marker of our own after them all.
    await listener.query(`SELECT pg_notify($1, 'test:end')`, [CHANGES_CHANNEL]);
    for (let i = 0; i < 50 && !heard.includes('test:end'); i++) await new Promise((r) => setTimeout(r, 20));
  } finally {
    await listener.end();
  }
  // `function-jobs` wakes the queue's claimers and `records` the change streams (docs/realtime.md): no cache listens to either.
  t.deepEqual(heard.filter((p) => p !== 'test:end' && !p.startsWith('function-jobs:') && !p.startsWith('records:')), [], 'no cache topic notified by a data write');
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
