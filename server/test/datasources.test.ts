// Data sources of an app: create (slug given or generated, unique per app), list, get by slug
// or id, update, delete refused while tables exist, stats, who may, isolation, inert injection.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
let adminUuid: string;

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

const onA = (method: string, p: string, body?: unknown, who = 'adminA') => s.api(method, p, { host: a.domain, token: tok[who], body });

test.before(async () => {
  s = await startTestServer();
  ({ a, b, adminUuid } = await twoSitesWithUsers(s, tok));
  tok.platform = (await s.login()).access;
  for (const name of ['Shop', 'Blog']) if ((await onA('POST', '/api/apps/', { name })).status !== 201) throw new Error('app');
});
test.after.always(async () => {
  await s?.close();
});

test.serial('create: generated or given slug, unique per app; fields of the spec', async (t) => {
  const res = await onA('POST', '/api/apps/shop/datasources/', { name: 'Main Store', provider_type: 'flat_table', provider_config: { schema: 'x' }, description: 'd' });
  t.is(res.status, 201, res.text);
  t.like(res.body, {
    status: 'success',
    data: {
      name: 'Main Store', slug: 'main-store', provider_type: 'flat_table', provider_config: { schema: 'x' }, description: 'd', is_active: true,
      app_name: 'Shop', app_slug: 'shop', table_count: 0, materialized_count: 0, created_by: adminUuid, modified_by: adminUuid,
    },
  });
  t.true(Number.isInteger(res.body.data.app));
  t.is((await onA('POST', '/api/apps/shop/datasources/', { name: 'main store', provider_type: 'jsonb' })).body.data.slug, 'main-store-2');
  const dup = await onA('POST', '/api/apps/shop/datasources/', { name: 'Other', slug: 'main-store', provider_type: 'jsonb' });
  t.is(dup.status, 400);
  t.truthy(dup.body.errors.slug);
  t.is((await onA('POST', '/api/apps/blog/datasources/', { name: 'Main', slug: 'main-store', provider_type: 'docstore' })).status, 201, 'same slug in another app');
  t.truthy((await onA('POST', '/api/apps/shop/datasources/', { name: 'X', slug: 'Bad Slug', provider_type: 'jsonb' })).body.errors.slug);
  t.truthy((await onA('POST', '/api/apps/shop/datasources/', { name: 'X', provider_type: 'csv' })).body.errors.provider_type);
  t.truthy((await onA('POST', '/api/apps/shop/datasources/', { name: 'X' })).body.errors.provider_type);
  t.is((await onA('POST', '/api/apps/shop/datasources/', { name: 'X', provider_type: 'jsonb' }, 'pleb')).status, 403);
  t.is((await onA('POST', '/api/apps/nope/datasources/', { name: 'X', provider_type: 'jsonb' })).status, 404);
});

test.serial('list, get by slug or id, update, stats, delete refused with tables', async (t) => {
  const list = await onA('GET', '/api/apps/shop/datasources/', undefined, 'pleb');
  t.is(list.status, 200);
  t.is(list.body.total, 2);
  t.deepEqual(list.body.data.map((x: { slug: string }) => x.slug), ['main-store', 'main-store-2']);
  const one = await onA('GET', '/api/apps/shop/datasources/main-store/', undefined, 'pleb');
  t.is(one.body.slug, 'main-store');
  t.is((await onA('GET', `/api/apps/shop/datasources/${one.body.id}/`)).body.slug, 'main-store');
  t.is((await onA('GET', `/api/apps/blog/datasources/${one.body.id}/`)).status, 404, 'id of another app');
  const patch = await onA('PATCH', '/api/apps/shop/datasources/main-store-2/', { name: 'Second', description: 'two' });
  t.like(patch.body, { name: 'Second', slug: 'main-store-2', description: 'two', provider_type: 'jsonb' });
  t.is((await onA('PUT', '/api/apps/shop/datasources/main-store-2/', { provider_type: 'flat_table' })).body.errors.provider_type[0], 'This field is read-only and cannot be changed.');
  t.truthy((await onA('PATCH', '/api/apps/shop/datasources/main-store-2/', { slug: 'main-store' })).body.errors.slug);
  t.is((await onA('PATCH', '/api/apps/shop/datasources/main-store-2/', { name: 'no' }, 'pleb')).status, 403);

  const [app] = await sql(`SELECT id FROM "${a.schema}".apps WHERE slug = 'shop'`);
  await sql(
    `INSERT INTO "${a.schema}".data_tables (app_id, data_source_id, name, json_schema, schema_hash, physical_table_name, is_materialized)
     VALUES (?, ?, 'items', '{}', repeat('a', 64), 'shop_items', true), (?, ?, 'drafts', '{}', repeat('b', 64), 'shop_drafts', false)`,
    [app.id, one.body.id, app.id, one.body.id],
  );
  t.deepEqual((await onA('GET', '/api/apps/shop/datasources/main-store/stats/', undefined, 'pleb')).body, {
    total_tables: 2, materialized_tables: 1, unmaterialized_tables: 1, provider_type: 'flat_table', is_active: true,
  });
  t.like((await onA('GET', '/api/apps/shop/datasources/main-store/')).body, { table_count: 2, materialized_count: 1 });
  const refused = await onA('DELETE', '/api/apps/shop/datasources/main-store/');
  t.is(refused.status, 400);
  t.regex(refused.body.message, /still has 2 table/);
  t.is((await onA('DELETE', '/api/apps/shop/datasources/main-store-2/', undefined, 'pleb')).status, 403);
  const del = await onA('DELETE', '/api/apps/shop/datasources/main-store-2/');
  t.deepEqual(del.body, { status: 'success', message: 'Data source "main-store-2" deleted.' });
  t.is((await onA('GET', '/api/apps/shop/datasources/main-store-2/')).status, 404);
});

test('isolation and inert injection', async (t) => {
  t.is((await s.api('GET', '/api/apps/shop/datasources/', { host: a.domain, token: tok.adminB })).status, 401);
  t.is((await s.api('GET', '/api/apps/shop/datasources/', { host: b.domain, token: tok.adminB })).status, 404);
  t.is((await s.api('GET', '/api/apps/shop/datasources/', { host: a.domain, token: tok.platform })).status, 401);
  t.is((await onA('GET', `/api/apps/shop/datasources/${encodeURIComponent("1 OR 1=1")}/`)).status, 404);
  t.is((await onA('GET', `/api/apps/shop/datasources/${encodeURIComponent("x' OR 'a'='a")}/stats/`)).status, 404);
  const odd = await onA('POST', '/api/apps/blog/datasources/', { name: `'); DROP TABLE data_sources; --`, provider_type: 'jsonb' });
  t.is(odd.status, 201);
  t.is(odd.body.data.slug, 'drop-table-data-sources');
  t.is((await onA('GET', '/api/apps/blog/datasources/')).body.total, 2);
});
