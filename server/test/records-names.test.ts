// Field names that are the records SQL's own names: every alias the engine uses (t, r, j, e, x,
// g, k, n, v, c0) and SQL keywords (select, order, user, count, id) never change the meaning of
// the generated SQL: insert, list with filter and sort, get, patch, upsert, populate, aggregate
// with group by, search, CSV export and import, for each provider.
import test from 'ava';
import type { ProviderType } from '../../shared/data/ddl.ts';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};
const PROVIDERS: ProviderType[] = ['flat_table', 'jsonb', 'docstore'];
const NAMES = ['t', 'r', 'j', 'e', 'x', 'g', 'k', 'n', 'v', 'c0', 'select', 'order', 'user', 'count'];
const schemaFor = (p: ProviderType): TableSchema => ({
  fields: [...(p === 'docstore' ? [] : [{ name: 'id', type: 'integer' as const }]), ...NAMES.map((name) => ({ name, type: name === 'count' || name === 'n' ? 'integer' as const : 'string' as const }))],
  ...(p === 'docstore' ? {} : { primaryKey: 'id' }),
});

const onA = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });
const record = (i: number) => Object.fromEntries(NAMES.map((f) => [f, f === 'count' || f === 'n' ? i : `${f}-${i}`]));

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a], PROVIDERS);
  await createTables(onA, [
    ...PROVIDERS.map((p) => [p, `kw_${p}`, schemaFor(p)] as [string, string, TableSchema]),
    ['flat_table', 'kw_child', { fields: [{ name: 'id', type: 'integer' }, { name: 'r', type: 'integer' }, { name: 't', type: 'string' }], primaryKey: 'id', foreignKeys: [{ fields: ['r'], reference: { resource: 'kw_flat_table', fields: ['id'] } }] }],
  ]);
});
test.after.always(async () => {
  await s?.close();
});

for (const p of PROVIDERS) {
  const D = `/api/apps/crm/datatables/kw_${p}/data/`;
  test.serial(`${p}: fields named t, r, j, e, x, g, k, n, v, c0, select, order, user, count keep their meaning`, async (t) => {
    const withId = (i: number) => ({ ...(p === 'docstore' ? {} : { id: i }), ...record(i) });
    const one = await onA('POST', D, withId(1));
    t.is(one.status, 201, one.text);
    t.like(one.body.data, record(1));
    const bulk = await onA('POST', D, [withId(2), withId(3)]);
    t.is(bulk.status, 201, bulk.text);
    t.like(bulk.body.data[1], record(3));
    const key = p === 'docstore' ? one.body.data.id : 1;
    const list = await onA('GET', `${D}?t=t-2&select__ne=x&_sort=-order`);
    t.is(list.status, 200, list.text);
    t.deepEqual(list.body.data.map((r: Record<string, unknown>) => r.user), ['user-2']);
    t.deepEqual((await onA('GET', `${D}?_sort=-count`)).body.data.map((r: Record<string, unknown>) => r.count), [3, 2, 1]);
    t.like((await onA('GET', `${D}${key}/`)).body.data, record(1));
    const patched = await onA('PATCH', `${D}${key}/`, { t: 'T!', order: 'first' });
    t.is(patched.status, 200, patched.text);
    t.like(patched.body.data, { ...record(1), t: 'T!', order: 'first' });
    const up = await onA('POST', `${D}upsert/?unique_fields=x`, { ...withId(2), r: 'R!' });
    t.is(up.status, 200, up.text);
    t.like(up.body.data, { ...record(2), r: 'R!' });
    const agg = await onA('GET', `${D}?_aggregate=count_distinct(t),sum(count),max(c0)&_group_by=g&_sort=-sum_count`);
    t.is(agg.status, 200, agg.text);
    t.deepEqual(agg.body.data[0], { g: 'g-3', count_distinct_t: 1, sum_count: 3, max_c0: 'c0-3' });
    const clash = await onA('GET', `${D}?_aggregate=count&_group_by=count`);
    t.is(clash.status, 400);
    t.regex(clash.body.errors._aggregate[0], /also be the group field "count"/);
    const search = await onA('GET', `${D}?search=first`);
    t.deepEqual(search.body.data.map((r: Record<string, unknown>) => r.user), ['user-1']);
    const csv = await onA('GET', `${D}?format=csv&_sort=count`);
    t.is(csv.status, 200);
    t.true(csv.text.split('\n')[1]!.includes('T!,r-1,j-1,e-1,x-1,g-1,k-1,1,v-1,c0-1,select-1,first,user-1,1'), csv.text);
    const imp = await s.api('POST', `${D}import/`, { host: a.domain, token: tok.adminA, raw: `${p === 'docstore' ? '' : 'id,'}${NAMES.join(',')}\n${p === 'docstore' ? '' : '4,'}${NAMES.map((f) => (f === 'count' || f === 'n' ? 4 : `${f}-4`)).join(',')}\n`, headers: { 'Content-Type': 'text/csv' } });
    t.like(imp.body, { created: 1, failed: 0 });
    t.like((await onA('GET', `${D}?count=4`)).body.data[0], record(4));
  });
}

test.serial('populate and relation paths through fields named r and t', async (t) => {
  const child = await onA('POST', '/api/apps/crm/datatables/kw_child/data/', [{ id: 1, r: 1, t: 'a' }, { id: 2, r: 1, t: 'b' }]);
  t.is(child.status, 201, child.text);
  const fwd = await onA('GET', '/api/apps/crm/datatables/kw_child/data/?populate=r&r.t=T!&_sort=r.count');
  t.is(fwd.status, 200, fwd.text);
  t.like(fwd.body.data[0], { id: 1, t: 'a', r: { id: 1, t: 'T!', r: 'r-1' } });
  const rev = await onA('GET', '/api/apps/crm/datatables/kw_flat_table/data/?populate=*&kw_child.t=b');
  t.is(rev.status, 200, rev.text);
  t.deepEqual(rev.body.data.map((r: Record<string, unknown>) => r.id), [1]);
  t.deepEqual((rev.body.data[0].kw_child as { t: string }[]).map((c) => c.t), ['a', 'b']);
});

test.serial('index names the DDL gives its own indexes and constraints are refused', async (t) => {
  for (const name of ['pkey', 'fk1', '_search', 'data_gin', 'doc_gin', '_u_t']) {
    const res = await onA('POST', '/api/apps/crm/datasources/flat_table/datatables/', { name: 'ix', json_schema: { fields: [{ name: 't', type: 'string' }], indexes: [{ name, fields: ['t'] }] } });
    t.is(res.status, 400, name);
    t.regex(res.body.errors.json_schema[0], /is reserved/, name);
  }
});
