// Several PostgreSQL clusters (issue 34 item 4, db/clusters.ts): a second cluster (a database of
// its own: none of the platform's tables) registered beside the primary; a site placed there is
// created, served (sign-in, linked administrators, site users, cache invalidation from its own
// cluster's notifications), migrated, probed and deleted on it, and stays apart from a site on
// the primary. Placement follows the documented rule; registration refuses what is not a cluster.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import pg from 'pg';
import { addCluster, listClusters, placeSite, setClusterState } from '../../shared/db/clusters.ts';
import { tenantStatus, CURRENT_TENANT_VERSION } from '../../shared/tenancy/migrations.ts';
import { createTestDatabase, type TestDatabase } from '../../shared/testing/database.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { within1s } from './processes.ts';
import { makeOrg, makeUser, type TestUser } from './site-fixtures.ts';

let s: TestServer;
let second: TestDatabase;
let root: string;
let owner: TestUser;
const ORG = 'clustered';

/** Rows of a statement on the second cluster's database. */
async function onSecond<T = Record<string, any>>(text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: second.url });
  await client.connect();
  try {
    return (await client.query(text, params)).rows as T[];
  } finally {
    await client.end();
  }
}
const schemaOn = async (where: 'primary' | 'second', schema: string) =>
  where === 'second'
    ? (await onSecond('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).length === 1
    : (await s.handle.db.orm.em.fork().execute('SELECT 1 FROM pg_namespace WHERE nspname = ?', [schema])).length === 1;
const em = () => s.handle.db.orm.em.fork();

let storageDir: string;

test.before(async () => {
  storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'clusters-storage-'));
  s = await startTestServer({ STORAGE_DIR: storageDir, FUNCTION_PREWARM: 'false' });
  second = await createTestDatabase('cluster');
  root = (await s.login()).access;
  owner = await makeUser(s, root, 'cluster-owner');
  await makeOrg(s, ORG, [{ uuid: owner.uuid, owner: true }]);
});
test.after.always(async () => {
  await s?.close();
  await second?.drop();
  fs.rmSync(storageDir, { recursive: true, force: true });
});

test.serial('registration: refuses a bad name, an unreachable URL, the primary\'s own database; takes an empty database and gives it the per-site tables', async (t) => {
  const refused = async (input: Parameters<typeof addCluster>[2], field: string) => {
    const err = await t.throwsAsync(addCluster(em(), s.handle.db.directUrl, input));
    t.deepEqual(Object.keys((err as { errors?: object }).errors ?? {}), [field], err?.message);
  };
  await refused({ name: 'Second!', url: second.url }, 'name');
  await refused({ name: 'primary', url: second.url }, 'name');
  await refused({ name: 'second', url: 'mysql://x@127.0.0.1/db' }, 'url');
  await refused({ name: 'second', url: 'postgres://postgres@127.0.0.1:1/none' }, 'url');
  await refused({ name: 'second', url: s.db.url }, 'url'); // the primary itself, by another spelling of its address
  await refused({ name: 'second', url: s.db.url.replace('127.0.0.1', 'localhost') }, 'url');
  t.deepEqual((await listClusters(em())).map((c) => c.name), ['primary'], 'nothing registered by a refusal');

  const added = await addCluster(em(), s.handle.db.directUrl, { name: 'second', url: second.url });
  t.like(added, { name: 'second', state: 'active', sites: 0, capacity: null });
  const tables = (await onSecond<{ t: string }>("SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")).map((r) => r.t);
  t.deepEqual(tables, ['function_jobs', 'idempotency_keys', 'sessions', 'tenant_schemas'], 'the per-site tables, none of the platform\'s');
  await refused({ name: 'second', url: second.url }, 'name'); // registered already
});

test.serial('a site on the second cluster: created, served, migrated, probed and deleted there; apart from a site on the primary', async (t) => {
  // Only a platform superuser names the cluster.
  const denied = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: owner.token, body: { name: 'Nope', cluster: 'second' } });
  t.is(denied.status, 400);
  t.deepEqual(Object.keys(denied.body.errors), ['cluster']);
  const unknown = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: root, body: { name: 'Nope', cluster: 'third' } });
  t.is(unknown.status, 400);

  const onPrimary = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: root, body: { name: 'Home', cluster: 'primary' } });
  const onSecondRes = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: root, body: { name: 'Away', cluster: 'second' } });
  t.is(onPrimary.status, 201, onPrimary.text);
  t.is(onSecondRes.status, 201, onSecondRes.text);
  const home = onPrimary.body.data;
  const away = onSecondRes.body.data;
  t.true(await schemaOn('second', away.schema_name));
  t.false(await schemaOn('primary', away.schema_name));
  t.true(await schemaOn('primary', home.schema_name));
  t.false(await schemaOn('second', home.schema_name));
  // Seeded there: the organization's owner as the site's linked administrator.
  t.deepEqual(await onSecond(`SELECT username, is_superuser FROM "${away.schema_name}".users`), [{ username: 'cluster-owner', is_superuser: true }]);

  // The owner's site token (a linked administrator: standing read on the primary, the user on the second cluster).
  const exchanged = await s.api('POST', `/api/cloud/sites/${away.schema_name}/token/`, { token: owner.token });
  t.is(exchanged.status, 200, exchanged.text);
  const admin = exchanged.body.access;
  const host = { host: away.primary_domain };
  const made = await s.api('POST', '/api/users/', { ...host, token: admin, body: { username: 'dora', email: 'dora@example.com', password: 'Dora-pass-word-1' } });
  t.is(made.status, 201, made.text);
  t.is((await onSecond(`SELECT 1 FROM "${away.schema_name}".users WHERE username = 'dora'`)).length, 1);
  const signIn = await s.api('POST', '/api/auth/jwt/token/', { ...host, body: { username: 'dora', password: 'Dora-pass-word-1' } });
  t.is(signIn.status, 200, signIn.text);
  const dora = signIn.body.access;
  const profile = await s.api('GET', '/api/profile/', { ...host, token: dora });
  t.is(profile.status, 200, profile.text);
  t.is(profile.body.data?.username ?? profile.body.username, 'dora');

  // Isolation: the second cluster's site token reaches nothing on the primary's site, and back.
  t.is((await s.api('GET', '/api/users/', { host: home.primary_domain, token: dora })).status, 401);
  t.is((await s.api('GET', '/api/users/', { host: home.primary_domain, token: admin })).status, 401);
  const homeAdmin = (await s.api('POST', `/api/cloud/sites/${home.schema_name}/token/`, { token: owner.token })).body.access;
  t.is((await s.api('GET', '/api/users/', { ...host, token: homeAdmin })).status, 401);
  t.is((await s.api('POST', '/api/auth/jwt/token/', { host: home.primary_domain, body: { username: 'dora', password: 'Dora-pass-word-1' } })).status, 401);

  // An app, a function run now and one queued (claimed from the second cluster's queue), a stored object.
  t.is((await s.api('POST', '/api/apps/', { ...host, token: admin, body: { name: 'Crm' } })).status, 201);
  const F = '/api/apps/crm/functions/';
  t.is((await s.api('POST', F, { ...host, token: admin, body: { name: 'Add', code: 'export default (e) => e.n + 1' } })).status, 201);
  const now = await s.api('POST', `${F}add/invoke/`, { ...host, token: admin, body: { payload: { n: 1 } } });
  t.is(now.status, 200, now.text);
  t.is(now.body.result, 2);
  const queued = await s.api('POST', `${F}add/invoke/`, { ...host, token: admin, body: { payload: { n: 41 }, async: true } });
  t.is(queued.status, 202, queued.text);
  // Claimed within the queue's poll (2 s) and a margin: the server reads the registered clusters
  // again when the site is made there, not 10 s after its last read (it waited ~9 s then).
  let record: { status?: string; result?: unknown } = {};
  for (let i = 0; i < 50 && record.status !== 'succeeded'; i++) {
    await new Promise((r) => setTimeout(r, 100));
    record = (await s.api('GET', `${F}add/invocations/${queued.body.id}/`, { ...host, token: admin })).body;
  }
  t.like(record, { status: 'succeeded', result: 42 });
  t.deepEqual(await onSecond('SELECT count(*)::int AS n FROM public.function_jobs'), [{ n: 0 }], 'its queue rows were on the second cluster, and are done');
  const B = '/api/apps/crm/storage/buckets/';
  t.is((await s.api('POST', B, { ...host, token: admin, body: { name: 'docs', app_category: 'attachments' } })).status, 201);
  const put = await s.api('PUT', `${B}docs/objects/a/b.txt`, { ...host, token: admin, raw: 'hello there', headers: { 'Content-Type': 'text/plain' } });
  t.true(put.status === 201 || put.status === 200, put.text);
  t.is((await s.api('GET', `${B}docs/objects/a/b.txt`, { ...host, token: admin })).text, 'hello there');
  t.is((await onSecond(`SELECT count(*)::int AS n FROM "${away.schema_name}".storage_objects`))[0].n, 1);

  // A change on the second cluster reaches this process's caches through that cluster's notifications.
  t.is((await s.api('GET', '/api/profile/', { ...host, token: dora })).status, 200);
  const got = await s.api('GET', `/api/users/${made.body.data.uuid}/`, { ...host, token: admin });
  const off = await s.api('PUT', `/api/users/${made.body.data.uuid}/`, { ...host, token: admin, body: { ...(got.body.data ?? got.body), is_active: false } });
  t.is(off.status, 200, off.text);
  t.is((await s.api('GET', '/api/profile/', { ...host, token: dora })).status, 401, 'a deactivated user is refused at once');

  // A demotion on the primary applies to the second cluster's site: made in SQL here (not through
  // the API, whose writes answer once every cache has it), it arrives by the primary's
  // notification, within a second.
  await em().execute('UPDATE public.organization_members SET is_owner = false, is_admin = false WHERE user_uuid = ?', [owner.uuid]);
  t.is((await within1s(() => s.api('GET', '/api/users/', { ...host, token: admin }), (r) => r.status === 401)).status, 401, 'the demoted owner\'s site token is refused');
  await em().execute('UPDATE public.organization_members SET is_owner = true, is_admin = true WHERE user_uuid = ?', [owner.uuid]);

  // Status and readiness name the cluster.
  const status = (await tenantStatus(em())).find((r) => r.schema === away.schema_name);
  t.like(status, { cluster: 'second', version: CURRENT_TENANT_VERSION, pending: 0 });
  const ready = await s.api('GET', '/readyz');
  t.is(ready.status, 200);
  t.deepEqual(ready.body.clusters, { primary: 'ok', second: 'ok' });

  // Delete: the schema and its version row go from the second cluster.
  t.is((await s.api('DELETE', `/api/cloud/sites/${away.slug}/`, { token: root })).status, 200);
  t.false(await schemaOn('second', away.schema_name));
  t.deepEqual(await onSecond('SELECT schema_name FROM public.tenant_schemas'), []);
  t.is((await s.api('GET', '/api/users/', { ...host, token: admin })).status, 404);
});

test.serial('placement: the active cluster with the fewest sites; a draining or full cluster takes none; none open is a 409', async (t) => {
  const primarySites = (await listClusters(em())).find((c) => c.name === 'primary')!.sites;
  t.true(primarySites > 0);
  t.is(await placeSite(em()), 'second', 'fewest sites');
  const made = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: owner.token, body: { name: 'Placed' } });
  t.is(made.status, 201, made.text);
  t.true(await schemaOn('second', made.body.data.schema_name));

  await setClusterState(em(), 'second', 'draining');
  t.is(await placeSite(em()), 'primary');
  const drained = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: root, body: { name: 'Drained', cluster: 'second' } });
  t.is(drained.status, 400);
  t.regex(drained.body.errors.cluster[0], /draining/);
  await setClusterState(em(), 'primary', 'read-only');
  const none = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: owner.token, body: { name: 'Nowhere' } });
  t.is(none.status, 409, none.text);
  t.is((await em().execute("SELECT count(*)::int AS n FROM public.sites WHERE name = 'Nowhere'"))[0].n, 0, 'nothing made');
  await setClusterState(em(), 'primary', 'active');
  await em().execute("UPDATE public.clusters SET state = 'active', capacity = 1 WHERE name = 'second'");
  const full = await s.api('POST', `/api/cloud/organizations/${ORG}/sites/`, { token: root, body: { name: 'Full', cluster: 'second' } });
  t.is(full.status, 400);
  t.regex(full.body.errors.cluster[0], /full/);
  t.is(await placeSite(em()), 'primary');
});
