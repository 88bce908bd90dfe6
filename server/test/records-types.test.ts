// Frictionless types through the records API and CSV import, for every provider: the spec's
// lexical forms are accepted (a time with or without an offset, negative durations, INF, the
// geopoint formats, CSV cells with groupChar, bareNumber and trueValues), stored and read back
// in a form that validates again (GET → PATCH back unchanged), and refused with the field named.
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
const SCHEMA = {
  fields: [
    { name: 'clock', type: 'time' },
    { name: 'd', type: 'duration' },
    { name: 'n', type: 'number', groupChar: ',' },
    { name: 'i', type: 'integer', bareNumber: false },
    { name: 'b', type: 'boolean', trueValues: ['yes'], falseValues: ['no'] },
    { name: 'g', type: 'geopoint' },
    { name: 'ga', type: 'geopoint', format: 'array' },
    { name: 'y', type: 'year' },
    { name: 'dt', type: 'datetime' },
  ],
} as TableSchema;

// Every type but duration: a flat table whose records PostgreSQL writes as JSON (TableView.jsonSql).
const JSON_SCHEMA = {
  fields: [
    ...SCHEMA.fields.filter((f) => f.type !== 'duration'),
    { name: 's', type: 'string' },
    { name: 'day', type: 'date' },
    { name: 'o', type: 'object' },
    { name: 'ym', type: 'yearmonth' },
    { name: 'u', type: 'string', format: 'uuid' },
  ],
} as TableSchema;

const onA = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });
const csv = (table: string, text: string) => s.api('POST', `/api/apps/crm/datatables/${table}/data/import/`, { host: a.domain, token: tok.adminA, raw: text, headers: { 'Content-Type': 'text/csv' } });

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a], PROVIDERS);
  await createTables(onA, PROVIDERS.map((p) => [p, `types_${p}`, SCHEMA] as [string, string, TableSchema]));
  await createTables(onA, [['flat_table', 'types_json', JSON_SCHEMA]]);
});
test.after.always(async () => {
  await s?.close();
});

for (const p of PROVIDERS) {
  const D = `/api/apps/crm/datatables/types_${p}/data/`;
  test.serial(`${p}: records writes take the spec's forms, read them back, and a GET → PATCH back round-trips`, async (t) => {
    const body = { clock: '13:45:00+02:00', d: '-P1DT2H', n: 'INF', i: 5, b: true, g: '90, 45', ga: [-122.4, 37.78], y: 2026, dt: '2026-02-27T09:15:00' };
    const res = await onA('POST', D, body);
    t.is(res.status, 201, res.text);
    const expected = { clock: '11:45:00', d: '-P1DT2H', n: 'INF', i: 5, b: true, g: '90, 45', ga: [-122.4, 37.78], y: 2026 };
    t.like(res.body.data, expected);
    t.is(Date.parse(res.body.data.dt), Date.parse('2026-02-27T09:15:00Z'));
    const plain = await onA('POST', D, { clock: '13:45:00', d: 'P1Y2M3DT4H5M6.5S', n: 1.5 });
    t.like(plain.body.data, { clock: '13:45:00', d: 'P1Y2M3DT4H5M6.5S', n: 1.5 });
    const key = encodeURIComponent(res.body.data.id);
    const got = await onA('GET', `${D}${key}/`);
    t.like(got.body.data, expected);
    const back = await onA('PATCH', `${D}${key}/`, got.body.data);
    t.is(back.status, 200, back.text);
    t.like(back.body.data, expected);
    t.deepEqual((await onA('GET', `${D}?d__lt=PT0S`)).body.data.map((r: { id: unknown }) => r.id), [res.body.data.id]);
    const bad = await onA('POST', D, { clock: '24:00:00', d: 'P1.5D', n: '1,000.5.5', i: 1.5, b: 'maybe', g: [90, 45], ga: '90, 45', y: '26', dt: '2026-02-27 09:15' });
    t.is(bad.status, 400);
    t.deepEqual(Object.keys(bad.body.errors).sort(), ['b', 'clock', 'd', 'dt', 'g', 'ga', 'i', 'n', 'y']);
  });

  test.serial(`${p}: CSV import casts cells by the field's options, agreeing with the JSON writes`, async (t) => {
    const ok = await csv(`types_${p}`, 'clock,d,n,i,b,g,ga,y,dt\n13:45:00Z,PT36H,"1,000.5",95%,yes,"90, 45","[1, 2]",2026,2026-02-27T09:15:00+01:00\n');
    t.is(ok.status, 200, ok.text);
    t.like(ok.body, { created: 1, failed: 0 });
    const [row] = (await onA('GET', `/api/apps/crm/datatables/types_${p}/data/?i=95`)).body.data;
    t.like(row, { clock: '13:45:00', d: 'PT36H', n: 1000.5, i: 95, b: true, g: '90, 45', ga: [1, 2], y: 2026 });
    const bad = await csv(`types_${p}`, 'clock,d,n,i,b,g,ga,y\n1pm,1 day,"1,000.5.5",%,true,"90;45",90,26\n');
    t.is(bad.status, 400, bad.text);
    t.like(bad.body.data, { created: 0, failed: 1 });
    t.deepEqual(Object.keys(bad.body.data.errors[0].errors).sort(), ['b', 'clock', 'd', 'g', 'ga', 'i', 'n', 'y']);
  });
}

test.serial('flat records written as JSON by PostgreSQL (get, list, create) equal the records as Node writes them (populate=* takes that path)', async (t) => {
  const D = '/api/apps/crm/datatables/types_json/data/';
  const rows = [
    { clock: '13:45:00+02:00', n: 'INF', i: 5, b: true, g: '90, 45', ga: [-122.4, 37.78], y: 2026, dt: '2026-02-27T09:15:00.123456Z', s: 'quote " backslash \\ é ✓', day: '2026-01-31', o: { b: [1, { c: null }], a: 'x' }, ym: '2026-02', u: '6f1c2a3e-9b4d-4c1e-8f2a-0d3b5e7c9a1f' },
    { n: '-INF', i: -9007199254740991, b: false, dt: '1999-12-31T23:59:59Z', s: '' },
    { n: 1e-7, i: 7, dt: '2026-06-01T00:00:00+05:30' },
    { i: 8 },
  ];
  const created = await onA('POST', D, rows);
  t.is(created.status, 201, created.text);
  const fast = await onA('GET', `${D}?page_size=10&_sort=-i`);
  const slow = await onA('GET', `${D}?page_size=10&_sort=-i&populate=*`);
  t.is(fast.status, 200, fast.text);
  t.regex(fast.headers.get('content-type') ?? '', /^application\/json/);
  // Compact, like every other body (issue 30 #7: json_build_object wrote `{"id" : 1, …}`); an
  // object field's value as PostgreSQL writes jsonb.
  t.false(fast.text.includes('" : '), fast.text.slice(0, 200));
  t.regex(fast.text, /"data":\[\{"[a-z_]+":/);
  t.deepEqual(fast.body, slow.body);
  // The create answers the same JSON (RETURNING written by PostgreSQL).
  t.deepEqual([...created.body.data].sort((x, y) => y.i - x.i), fast.body.data);
  t.is(fast.body.data.length, rows.length);
  const [eight, seven, five, min] = fast.body.data;
  t.like(five, { n: 'INF', dt: '2026-02-27T09:15:00.123Z', s: rows[0]!.s, o: rows[0]!.o, clock: '11:45:00', day: '2026-01-31', b: true, u: rows[0]!.u });
  t.like(min, { n: '-INF', i: -9007199254740991, clock: null });
  t.like(seven, { n: 1e-7, dt: '2026-05-31T18:30:00.000Z' });
  t.like(eight, { i: 8, n: null, dt: null, o: null, b: null, u: null });
  for (const [i, record] of fast.body.data.entries()) {
    const one = await onA('GET', `${D}${encodeURIComponent(record.id)}/`);
    const populated = await onA('GET', `${D}${encodeURIComponent(record.id)}/?populate=*`);
    t.deepEqual(one.body, { data: record }, `record ${i}`);
    t.deepEqual(populated.body, one.body, `record ${i}, populated`);
  }
  t.is((await onA('GET', `${D}00000000-0000-0000-0000-000000000000/`)).status, 404);
});

test.serial('issue 30 #7: sums and averages of decimal values come without binary noise (0.3, not 0.30000000000000004), every provider', async (t) => {
  const schema = { fields: [{ name: 'k', type: 'string' }, { name: 'price', type: 'number' }] } as TableSchema;
  await createTables(onA, PROVIDERS.map((p) => [p, `sums_${p}`, schema] as [string, string, TableSchema]));
  for (const p of PROVIDERS) {
    const D = `/api/apps/crm/datatables/sums_${p}/data/`;
    const made = await onA('POST', D, [{ k: 'a', price: 0.1 }, { k: 'a', price: 0.2 }, { k: 'b', price: 0.7 }, { k: 'b', price: 0.1 }, { k: 'b', price: 0.2 }, { k: 'c', price: 'INF' }]);
    t.is(made.status, 201, made.text);
    const agg = await onA('GET', `${D}?_aggregate=sum(price),avg(price),max(price)&_group_by=k&_sort=k`);
    t.is(agg.status, 200, agg.text);
    t.deepEqual(agg.body.data, [
      { k: 'a', sum_price: 0.3, avg_price: 0.15, max_price: 0.2 },
      { k: 'b', sum_price: 1, avg_price: 0.333333333333333, max_price: 0.7 },
      { k: 'c', sum_price: 'Infinity', avg_price: 'Infinity', max_price: 'Infinity' },
    ], p);
  }
});
