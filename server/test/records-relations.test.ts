// The records API beyond one table, on real PostgreSQL with the fixtures: conditions through
// foreign keys, reverse foreign keys and many-to-many; sort on related fields; populate
// (named, `*`, reverse arrays); aggregates with group by; keyword search (and its index);
// upsert; patch many (all or nothing); composite-key addressing; a 10,000-record bulk create;
// injection attempts in populate/aggregate/group by/sort/search; another site reaches nothing.
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { adminsWrite, createTables, fixture, fixtureRows, seedCrm, type Row } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
let appId = 0;
const companies = fixtureRows('companies');
const contacts = fixtureRows('contacts');
const tags = [
  { id: 1, name: 'partner', color: '#00aa00' },
  { id: 2, name: 'prospect', color: '#aa0000' },
  { id: 3, name: 'unused' },
];
// companies 1..5 are partners, 4..8 prospects.
const companyTags = [
  ...[1, 2, 3, 4, 5].map((c) => ({ company_id: c, tag_id: 1 })),
  ...[4, 5, 6, 7, 8].map((c) => ({ company_id: c, tag_id: 2 })),
];

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const on = (method: string, path: string, body?: unknown, who = 'adminA', site?: TestSite) => s.api(method, path, { host: (site ?? a).domain, token: tok[who], body });
const D = (table: string) => `/api/apps/crm/datatables/${table}/data/`;
const ids = (res: { body: { data: Row[] } }) => res.body.data.map((r) => r.id);
const count = async (table: string) => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_${table}"`))[0].n);

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a, b]);
  await createTables(on, ['companies', 'contacts', 'orders', 'tags', 'company_tags'].map((name) => ['main', name, fixture(`${name}.json`)]));
  for (const [table, rows] of [['companies', companies], ['contacts', contacts], ['tags', tags], ['company_tags', companyTags]] as const) {
    const res = await on('POST', D(table), rows);
    if (res.status !== 201) throw new Error(res.text);
  }
});
test.after.always(async () => {
  await s?.close();
});

test('conditions through a foreign key, a reverse foreign key and a many-to-many relation', async (t) => {
  const byName = new Map(companies.map((c) => [c.id, c]));
  const fr = await on('GET', `${D('contacts')}?company_id.country=FR&page_size=1000`);
  t.is(fr.status, 200, fr.text);
  t.deepEqual(ids(fr), contacts.filter((c) => c.company_id !== null && byName.get(c.company_id)!.country === 'FR').map((c) => c.id));
  const big = await on('GET', `${D('contacts')}?company_id.employees__gte=5000&status=active&page_size=1000`);
  t.deepEqual(ids(big), contacts.filter((c) => c.status === 'active' && c.company_id !== null && byName.get(c.company_id)!.employees >= 5000).map((c) => c.id));

  const leads = await on('GET', `${D('companies')}?contacts.status=lead&page_size=1000`);
  t.is(leads.status, 200, leads.text);
  t.deepEqual(ids(leads), companies.filter((c) => contacts.some((p) => p.company_id === c.id && p.status === 'lead')).map((c) => c.id));

  const partners = await on('GET', `${D('companies')}?tags.name=partner&page_size=1000`);
  t.is(partners.status, 200, partners.text);
  t.deepEqual(ids(partners), [1, 2, 3, 4, 5]);
  const both = await on('GET', `${D('companies')}?tags.name=partner&tags.name__in=prospect&page_size=1000`);
  t.deepEqual(ids(both), [4, 5], 'each condition on a relation is its own "some related record"');
  const back = await on('GET', `${D('tags')}?companies.country__in=US,FR`);
  t.is(back.status, 200, back.text);
  const expected = tags.filter((g) => companyTags.some((ct) => ct.tag_id === g.id && ['US', 'FR'].includes(byName.get(ct.company_id)!.country))).map((g) => g.id);
  t.deepEqual(ids(back), expected);

  for (const bad of ['company_id.nope=1', 'nope.name=1', 'contacts.status__like=x', 'company_id.employees=many']) {
    const res = await on('GET', `${D('contacts')}?${bad}`);
    t.is(res.status, 400, bad);
    t.truthy(Object.keys(res.body.errors ?? {}).length, bad);
  }
});

test('sort on a related field; reverse relations are not sortable', async (t) => {
  const byName = new Map(companies.map((c) => [c.id, c.name as string]));
  const res = await on('GET', `${D('contacts')}?company_id__isnull=false&_sort=company_id.name,-id&page_size=1000`);
  t.is(res.status, 200, res.text);
  const expected = contacts
    .filter((c) => c.company_id !== null)
    .sort((x, y) => byName.get(x.company_id)!.localeCompare(byName.get(y.company_id)!, 'en') || y.id - x.id)
    .map((c) => c.id);
  t.deepEqual(ids(res), expected);
  t.is((await on('GET', `${D('companies')}?_sort=contacts.id`)).status, 400);
});

test('populate: a foreign key becomes its record, reverse and many-to-many relations arrays, * all of them', async (t) => {
  const one = await on('GET', `${D('contacts')}1/?populate=company_id`);
  t.is(one.status, 200, one.text);
  t.like(one.body.data.company_id, { id: 2, name: 'Bluewave Logistics' });
  const company = await on('GET', `${D('companies')}4/?populate=*`);
  t.is(company.status, 200, company.text);
  t.deepEqual(company.body.data.contacts.map((c: Row) => c.id), contacts.filter((c) => c.company_id === 4).map((c) => c.id));
  t.deepEqual(company.body.data.tags.map((g: Row) => g.name), ['partner', 'prospect']);
  t.true(Array.isArray(company.body.data.company_tags));
  const list = await on('GET', `${D('companies')}?populate=tags,contacts&page_size=10`);
  t.is(list.status, 200, list.text);
  for (const c of list.body.data as Row[]) {
    t.deepEqual(c.tags.map((g: Row) => g.id), companyTags.filter((ct) => ct.company_id === c.id).map((ct) => ct.tag_id), `tags of ${c.id}`);
    t.is(c.contacts.length, contacts.filter((p) => p.company_id === c.id).length);
  }
  const orphan = contacts.find((c) => c.company_id === null);
  if (orphan) t.is((await on('GET', `${D('contacts')}${orphan.id}/?populate=company_id`)).body.data.company_id, null);
  const bad = await on('GET', `${D('contacts')}?populate=company_id,nope`);
  t.is(bad.status, 400);
  t.regex(bad.body.errors.populate[0], /Unknown relation "nope"/);
});

test('aggregates: count, count_distinct, sum, avg, min, max, with group by, conditions, sort and pages', async (t) => {
  const all = await on('GET', `${D('companies')}?_aggregate=count,sum(employees),min(founded),max(revenue),count_distinct(country)`);
  t.is(all.status, 200, all.text);
  t.deepEqual(all.body.data, [{
    count: companies.length,
    sum_employees: companies.reduce((n, c) => n + c.employees, 0),
    min_founded: Math.min(...companies.map((c) => c.founded)),
    max_revenue: Math.max(...companies.map((c) => c.revenue)),
    count_distinct_country: new Set(companies.map((c) => c.country)).size,
  }]);
  const grouped = await on('GET', `${D('companies')}?_aggregate=count,avg(employees)&_group_by=country&founded__gte=1950&_sort=-count`);
  t.is(grouped.status, 200, grouped.text);
  const expected = new Map<string, Row[]>();
  for (const c of companies.filter((x) => x.founded >= 1950)) expected.set(c.country, [...(expected.get(c.country) ?? []), c]);
  t.is(grouped.body.total, expected.size);
  for (const g of grouped.body.data as Row[]) {
    const members = expected.get(g.country)!;
    t.is(g.count, members.length);
    t.true(Math.abs(g.avg_employees - members.reduce((n, c) => n + c.employees, 0) / members.length) < 1e-6);
  }
  const counts = (grouped.body.data as Row[]).map((g) => g.count);
  t.deepEqual(counts, [...counts].sort((x, y) => y - x));
  const paged = await on('GET', `${D('contacts')}?_aggregate=count&_group_by=status,company_id&page_size=2&page=2`);
  t.is(paged.body.data.length, 2);
  for (const bad of ['_aggregate=sum(name)', '_aggregate=median(employees)', '_aggregate=sum(nope)', '_aggregate=count&_group_by=nope', '_aggregate=count&_sort=name', '_aggregate=sum', '_aggregate=count)%3BDROP%20TABLE%20x', '_aggregate=count&_group_by=contacts.id']) {
    const res = await on('GET', `${D('companies')}?${bad}`);
    t.is(res.status, 400, bad);
  }
  t.is(await count('companies'), companies.length);
});

test('search: word prefixes over the text fields, through the full-text index', async (t) => {
  const res = await on('GET', `${D('companies')}?search=robot`);
  t.is(res.status, 200, res.text);
  t.deepEqual(ids(res), companies.filter((c) => /\brobot/i.test(`${c.name} ${c.domain} ${c.website} ${c.email} ${c.industry} ${c.country}`)).map((c) => c.id));
  t.true(res.body.data.length > 0);
  const two = await on('GET', `${D('companies')}?search=${encodeURIComponent('acme ROBOTICS')}&country=US`);
  t.deepEqual(ids(two), [1]);
  t.deepEqual((await on('GET', `${D('companies')}?search=${encodeURIComponent("x' OR 1=1 --")}`)).body.data, []);
  // The table got a GIN index on the search expression at materialization, usable by the planner.
  const [idx] = await sql(`SELECT indexdef FROM pg_indexes WHERE schemaname = ? AND indexname = ?`, [a.schema, `a${appId}_companies__search`]);
  const expr = /USING gin \((to_tsvector\(.*\))\)$/.exec(idx.indexdef)?.[1];
  t.truthy(expr, idx.indexdef);
  const plan = await s.handle.db.orm.em.fork().transactional(async (tx) => {
    await tx.execute('SET LOCAL enable_seqscan = off');
    return tx.execute(`EXPLAIN SELECT 1 FROM "${a.schema}"."a${appId}_companies" WHERE ${expr} @@ to_tsquery('simple', 'acme:*')`);
  });
  t.regex(JSON.stringify(plan), new RegExp(`Bitmap Index Scan on a${appId}_companies__search`));
});

test.serial('upsert: 201 created, then 200 updated by the unique field; needs the field and a value', async (t) => {
  const path = `${D('tags')}upsert/?unique_fields=name`;
  const created = await on('POST', path, { id: 50, name: 'vip', color: '#123456' });
  t.is(created.status, 201, created.text);
  t.deepEqual(created.body, { data: { id: 50, name: 'vip', color: '#123456' }, created: true });
  const updated = await on('POST', path, { id: 50, name: 'vip', color: '#654321' });
  t.is(updated.status, 200, updated.text);
  t.deepEqual(updated.body, { data: { id: 50, name: 'vip', color: '#654321' }, created: false });
  t.is(Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_tags" WHERE name = 'vip'`))[0].n), 1);
  t.is((await on('POST', `${D('tags')}upsert/`, { id: 51, name: 'x' })).status, 400);
  t.is((await on('POST', `${D('tags')}upsert/?unique_fields=nope`, { id: 51, name: 'x' })).status, 400);
  t.is((await on('POST', `${D('tags')}upsert/?unique_fields=color`, { id: 51, name: 'y' })).status, 400, 'no value for the identifying field');
  await sql(`UPDATE "${a.schema}"."a${appId}_tags" SET color = '#abcdef' WHERE id IN (1, 2)`);
  const several = await on('POST', `${D('tags')}upsert/?unique_fields=color`, { id: 1, name: 'partner', color: '#abcdef' });
  t.is(several.status, 409, 'values that match several records identify none');
  t.truthy(several.body.errors.unique_fields);
  const racing = await Promise.all([1, 2, 3, 4].map((i) => on('POST', path, { id: 60, name: 'race', color: `#00000${i}` })));
  t.deepEqual(racing.map((r) => r.status).sort(), [200, 200, 200, 201]);
  await adminsWrite(on, 'tags');
  t.is((await on('POST', path, { id: 52, name: 'z' }, 'pleb')).status, 403);
});

test.serial('patch many: each item carries its key; one bad item → nothing changed', async (t) => {
  const ok = await on('PATCH', D('tags'), [{ id: 1, color: '#111111' }, { id: 2, color: '#222222' }]);
  t.is(ok.status, 200, ok.text);
  t.deepEqual(ok.body.data.map((r: Row) => r.color), ['#111111', '#222222']);
  const bad = await on('PATCH', D('tags'), [{ id: 1, color: '#333333' }, { id: 2, color: 'red' }, { color: '#444444' }, { id: 999, color: '#555555' }]);
  t.is(bad.status, 400, bad.text);
  t.truthy(bad.body.errors['1.color']);
  t.truthy(bad.body.errors['2.id']);
  t.truthy(bad.body.errors['3.id']);
  const [row] = await sql(`SELECT color FROM "${a.schema}"."a${appId}_tags" WHERE id = 1`);
  t.is(row.color, '#111111', 'the valid first item was rolled back');
  const dup = await on('PATCH', D('tags'), [{ id: 1, name: 'prospect' }]);
  t.is(dup.status, 409);
  t.truthy(dup.body.errors['0.name']);
  t.is((await on('PATCH', D('tags'), { id: 1 })).status, 400);
});

test.serial('composite keys: get, patch, delete by "a,b" or a JSON array; ids as key arrays', async (t) => {
  const lines = [1, 2, 3].map((n) => ({ order_number: 'ORD-000001', line_no: n, contact_id: 1, sku: `SKU-${n}`, ordered_at: '2026-01-01T10:00:00Z' }));
  t.is((await on('POST', D('orders'), lines)).status, 201);
  const got = await on('GET', `${D('orders')}ORD-000001,2/`);
  t.is(got.status, 200, got.text);
  t.like(got.body.data, { order_number: 'ORD-000001', line_no: 2, sku: 'SKU-2', quantity: 1, status: 'pending' });
  const json = await on('GET', `${D('orders')}${encodeURIComponent('["ORD-000001",3]')}/`);
  t.is(json.body.data.sku, 'SKU-3');
  t.is((await on('GET', `${D('orders')}ORD-000001/`)).status, 404);
  t.is((await on('GET', `${D('orders')}ORD-000001,x/`)).status, 404);
  const patched = await on('PATCH', `${D('orders')}ORD-000001,2/`, { quantity: 5 });
  t.is(patched.body.data.quantity, 5);
  const many = await on('PATCH', D('orders'), [{ order_number: 'ORD-000001', line_no: 1, status: 'paid' }]);
  t.is(many.body.data[0].status, 'paid');
  t.is((await on('DELETE', `${D('orders')}ORD-000001,1/`)).status, 204);
  const gone = await on('DELETE', `${D('orders')}?ids=${encodeURIComponent('[["ORD-000001",2],["ORD-000001",3],["ORD-000009",1]]')}`);
  t.is(gone.status, 200, gone.text);
  t.is(gone.body.deleted, 2);
  t.deepEqual(gone.body.ids.sort(), [['ORD-000001', 2], ['ORD-000001', 3]]);
  t.is((await on('DELETE', `${D('orders')}?ids=ORD-000001`)).status, 400);
});

test.serial('bulk create of 10,000 records in one request; one bad row → nothing written, the row named', async (t) => {
  const rows = Array.from({ length: 10_000 }, (_, i) => ({ id: 1000 + i, name: `bulk-${i}` }));
  const res = await on('POST', D('tags'), rows);
  t.is(res.status, 201, res.text.slice(0, 300));
  t.is(res.body.data.length, 10_000);
  t.deepEqual(res.body.data[9999], { id: 10_999, name: 'bulk-9999', color: null });
  const before = await count('tags');
  const dup = Array.from({ length: 500 }, (_, i) => ({ id: 20_000 + i, name: i === 321 ? 'bulk-7' : `more-${i}` }));
  const bad = await on('POST', D('tags'), dup);
  t.is(bad.status, 409, bad.text);
  t.deepEqual(Object.keys(bad.body.errors), ['321.name']);
  t.is(await count('tags'), before);
  t.is((await on('POST', D('tags'), Array.from({ length: 10_001 }, (_, i) => ({ id: 40_000 + i, name: `x${i}` })))).status, 400);
  t.is((await on('DELETE', `${D('tags')}?filter=${encodeURIComponent(JSON.stringify({ name__startswith: 'bulk-' }))}`)).body.deleted, 10_000);
});

test('another site and its users reach none of it', async (t) => {
  for (const path of [`${D('companies')}?populate=*`, `${D('companies')}?_aggregate=count`, `${D('companies')}?search=acme`, `${D('companies')}?tags.name=partner`]) {
    const other = await on('GET', path, undefined, 'adminB', b);
    t.is(other.status, 404, `${path}: site B has no such table data`);
    t.is((await on('GET', path, undefined, 'adminB')).status, 401, `${path}: site B's token on site A`);
  }
  t.is((await on('POST', `${D('tags')}upsert/?unique_fields=name`, { id: 70, name: 'b' }, 'adminB')).status, 401);
  t.is((await on('PATCH', D('tags'), [{ id: 1, color: '#000000' }], 'adminB')).status, 401);
});
