// Frictionless field properties in JSON records and CSV alike (issue 30 #9): number with
// decimalChar, groupChar and bareNumber, integer with bareNumber, boolean with trueValues and
// falseValues, the schema's missingValues. Every write path (create one and many, upsert, patch
// one and many, CSV import) and validate_data casts with the same function; values are stored and
// read back in their canonical form (numbers as numbers, booleans as booleans); bad property
// definitions are refused naming the field and the property.
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
  primaryKey: 'code',
  missingValues: ['', 'NA', '-'],
  fields: [
    { name: 'code', type: 'string', constraints: { required: true } },
    { name: 'amount', type: 'number', groupChar: ',' },
    { name: 'price', type: 'number', decimalChar: ',', groupChar: '.' },
    { name: 'pct', type: 'number', bareNumber: false, constraints: { maximum: 100 } },
    { name: 'qty', type: 'integer', bareNumber: false },
    { name: 'n', type: 'integer' },
    { name: 'active', type: 'boolean', trueValues: ['yes', 'Y'], falseValues: ['no', 'N'] },
    { name: 'flag', type: 'boolean' },
    { name: 'note', type: 'string' },
  ],
} as TableSchema;
/** One record in text forms, and the canonical record it is stored as. */
const TEXT = { code: 'a', amount: '1,234.5', price: '1.234,5', pct: '95 %', qty: '12 items', n: '7', active: 'yes', flag: 'TRUE', note: 'NA' };
const CANONICAL = { code: 'a', amount: 1234.5, price: 1234.5, pct: 95, qty: 12, n: 7, active: true, flag: true, note: null };

const onA = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });
const csv = (table: string, text: string) => s.api('POST', `/api/apps/crm/datatables/${table}/data/import/`, { host: a.domain, token: tok.adminA, raw: text, headers: { 'Content-Type': 'text/csv' } });
/** The record's fields of CANONICAL (one absent from a JSON document reads as null). */
const strip = (r: Record<string, unknown>) => Object.fromEntries(Object.keys(CANONICAL).map((k) => [k, r[k] ?? null]));

test.before(async () => {
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a], PROVIDERS);
  await createTables(onA, PROVIDERS.map((p) => [p, `fl_${p}`, SCHEMA] as [string, string, TableSchema]));
});
test.after.always(async () => {
  await s?.close();
});

for (const p of PROVIDERS) {
  const D = `/api/apps/crm/datatables/fl_${p}/data/`;
  /** The record with this code (a docstore's key is its generated id). */
  const byCode = async (code: string) => (await onA('GET', `${D}?code=${code}`)).body.data[0];
  const keyOf = async (code: string): Promise<Record<string, string>> => (p === 'docstore' ? { id: (await byCode(code)).id } : { code });
  const pathOf = async (code: string) => `${D}${Object.values(await keyOf(code))[0]}/`;

  test.serial(`${p}: JSON strings are read with the field's properties on every write path, stored and read back canonical`, async (t) => {
    const one = await onA('POST', D, TEXT);
    t.is(one.status, 201, one.text);
    t.deepEqual(strip(one.body.data), CANONICAL);
    t.deepEqual(strip((await onA('GET', await pathOf('a'))).body.data), CANONICAL);
    // Native JSON numbers and booleans are the values already.
    const native = await onA('POST', D, { code: 'b', amount: 1234.5, price: 0.5, pct: 95, qty: 12, n: 7, active: false, flag: false });
    t.is(native.status, 201, native.text);
    t.like(native.body.data, { amount: 1234.5, price: 0.5, active: false, flag: false });

    const many = await onA('POST', D, [{ ...TEXT, code: 'c' }, { code: 'd', amount: '-', active: 'N', flag: '0', qty: '#3' }]);
    t.is(many.status, 201, many.text);
    t.deepEqual(strip(many.body.data[0]), { ...CANONICAL, code: 'c' });
    t.like(many.body.data[1], { code: 'd', amount: null, active: false, flag: false, qty: 3 });

    const patched = await onA('PATCH', await pathOf('b'), { amount: '2,000', active: 'Y', note: '' });
    t.is(patched.status, 200, patched.text);
    t.like(patched.body.data, { amount: 2000, active: true, note: null, price: 0.5 });
    const bulk = await onA('PATCH', D, [{ ...(await keyOf('c')), price: '0,25', flag: 'false' }, { ...(await keyOf('d')), n: '42' }]);
    t.is(bulk.status, 200, bulk.text);
    t.like(bulk.body.data[0], { price: 0.25, flag: false });
    t.like(bulk.body.data[1], { n: 42 });

    const up = await onA('POST', `${D}upsert/?unique_fields=code`, { code: 'e', amount: '3,000.75', active: 'no' });
    t.is(up.status, 201, up.text);
    t.like(up.body.data, { amount: 3000.75, active: false });
    const again = await onA('POST', `${D}upsert/?unique_fields=code`, { code: 'e', amount: '1,000' });
    t.is(again.status, 200, again.text);
    t.like(again.body.data, { amount: 1000, active: false });

    // Read back as canonical values: filters on them work.
    const list = await onA('GET', `${D}?active=true&_sort=code`);
    t.deepEqual(list.body.data.map((r: { code: string }) => r.code), ['a', 'b', 'c']);
  });

  test.serial(`${p}: texts the properties do not read are refused naming the field; nothing is stored`, async (t) => {
    const before = (await onA('GET', `${D}?page_size=100`)).body.total;
    // trueValues replaces the defaults: "true" is not a true value of `active`; "1.234,5" is no number with decimalChar "." and groupChar ",".
    const bad = await onA('POST', D, [{ code: 'x1', active: 'true', amount: 'abc', pct: '150%', qty: '1.5' }, { code: 'NA' }]);
    t.is(bad.status, 400);
    t.deepEqual(bad.body.errors, {
      '0.active': ['Invalid boolean "true": expected one of yes, Y, no, N.'],
      '0.amount': ['Invalid number "abc".'],
      '0.pct': ['must be <= 100'],
      '0.qty': ['Invalid integer "1.5".'],
      // A missing value is null: the required key has none.
      '1.code': ['This field is required.'],
    });
    const patch = await onA('PATCH', await pathOf('a'), { flag: 'yes' });
    t.is(patch.status, 400);
    t.deepEqual(patch.body.errors, { flag: ['Invalid boolean "yes": expected one of true, True, TRUE, 1, false, False, FALSE, 0.'] });
    t.is((await onA('GET', `${D}?page_size=100`)).body.total, before);
    t.like(await byCode('a'), { flag: true });
  });

  test.serial(`${p}: CSV cells cast exactly as JSON strings do (one cast), missing values leave the field out`, async (t) => {
    const header = Object.keys(TEXT).join(',');
    const row = (code: string) => Object.values({ ...TEXT, code }).map((v) => `"${v}"`).join(',');
    const res = await csv(`fl_${p}`, `${header}\n${row('csv1')}\ncsv2,NA,"0,5",3%,-,,Y,1,\n`);
    t.is(res.status, 200, res.text);
    t.like(res.body, { created: 2, failed: 0 });
    t.deepEqual(strip(await byCode('csv1')), { ...CANONICAL, code: 'csv1' });
    t.deepEqual(strip(await byCode('csv2')), { code: 'csv2', amount: null, price: 0.5, pct: 3, qty: null, n: null, active: true, flag: true, note: null });
    const bad = await csv(`fl_${p}`, `code,amount,active,qty\ncsv3,"1,000",true,x\n`);
    t.is(bad.status, 400); // a failing import: the report under data
    t.like(bad.body.data, { created: 0, failed: 1 });
    t.deepEqual(bad.body.data.errors[0].errors, { active: ['Invalid boolean "true": expected one of yes, Y, no, N.'], qty: ['Invalid integer "x".'] });
  });
}

test.serial('validate_data casts as the writes do', async (t) => {
  const res = await onA('POST', '/api/apps/crm/datatables/fl_flat_table/validate_data/', { data: [TEXT, { code: 'z', active: 'true', amount: '1,2,3.4.5' }] });
  t.is(res.status, 200, res.text);
  t.deepEqual(res.body, {
    is_valid: false,
    errors: ['row 1: field \'amount\': Invalid number "1,2,3.4.5".', 'row 1: field \'active\': Invalid boolean "true": expected one of yes, Y, no, N.'],
    validated_rows: 2,
  });
});

test.serial('bad property definitions: 400 naming the field and the property, on create and on PATCH; nothing changes', async (t) => {
  const create = await onA('POST', '/api/apps/crm/datasources/flat_table/datatables/', {
    name: 'bad_props',
    json_schema: {
      missingValues: [null],
      fields: [
        { name: 'a', type: 'number', decimalChar: '' },
        { name: 'b', type: 'number', groupChar: '.', decimalChar: '.' },
        { name: 'c', type: 'integer', decimalChar: ',' },
        { name: 'd', type: 'boolean', trueValues: ['y', 'n'], falseValues: ['n'] },
        { name: 'e', type: 'boolean', falseValues: 'no' },
        { name: 'f', type: 'number', bareNumber: 1 },
      ],
    },
  });
  t.is(create.status, 400);
  t.deepEqual(create.body.errors.json_schema, [
    'missingValues must be an array of strings.',
    "Field 'a': decimalChar must be a single character.",
    "Field 'b': decimalChar and groupChar must differ.",
    "Field 'c': property 'decimalChar' applies to number fields only.",
    "Field 'd': trueValues and falseValues overlap.",
    "Field 'e': falseValues must be a non-empty array of strings.",
    "Field 'f': bareNumber must be a boolean.",
  ]);
  t.is((await onA('GET', '/api/apps/crm/datatables/bad_props/')).status, 404);
  const before = (await onA('GET', '/api/apps/crm/datatables/fl_flat_table/')).body.data;
  const patch = await onA('PATCH', '/api/apps/crm/datatables/fl_flat_table/', { json_schema: { ...SCHEMA, fields: SCHEMA.fields.map((f) => (f.name === 'amount' ? { ...f, groupChar: ',,' } : f)) } });
  t.is(patch.status, 400);
  t.deepEqual(patch.body.errors.json_schema, ["Field 'amount': groupChar must be a single character."]);
  t.deepEqual((await onA('GET', '/api/apps/crm/datatables/fl_flat_table/')).body.data, before);
});

test.serial('changing a property of a materialized table is a migration without DDL, and the new property applies at once', async (t) => {
  const T = '/api/apps/crm/datatables/fl_jsonb/';
  const schema = { ...SCHEMA, fields: SCHEMA.fields.map((f) => (f.name === 'active' ? { ...f, trueValues: ['oui'], falseValues: ['non'] } : f)) };
  const preview = await onA('POST', `${T}preview-changes/`, { new_schema: schema });
  t.is(preview.status, 200, preview.text);
  t.deepEqual(preview.body.operations, []);
  const patch = await onA('PATCH', T, { json_schema: schema });
  t.is(patch.status, 200, patch.text);
  const created = await onA('POST', `${T}data/`, { code: 'fr', active: 'oui' });
  t.is(created.status, 201, created.text);
  t.like(created.body.data, { active: true });
  t.is((await onA('POST', `${T}data/`, { code: 'fr2', active: 'yes' })).status, 400);
});

test('a schema without missingValues keeps an empty JSON string: read, edited and sent back, it stays ""', async (t) => {
  await createTables(onA, [['flat_table', 'fl_plain', { primaryKey: 'code', fields: [{ name: 'code', type: 'string' }, { name: 'note', type: 'string', constraints: { required: true } }, { name: 'n', type: 'integer' }] } as TableSchema]]);
  const D = '/api/apps/crm/datatables/fl_plain/data/';
  const created = await onA('POST', D, { code: 'e', note: '', n: 1 });
  t.is(created.status, 201, created.text);
  const read = (await onA('GET', `${D}e/`)).body.data;
  t.is(read.note, '');
  const back = await onA('PATCH', `${D}e/`, { ...read, n: 2 });
  t.is(back.status, 200, back.text);
  t.like((await onA('GET', `${D}e/`)).body.data, { note: '', n: 2 });
  // In a CSV file the empty cell is still a missing value (the Frictionless default): required says so.
  const imported = await csv('fl_plain', 'code,note,n\nf,,3\n');
  t.regex(imported.text, /note/);
  t.is((await onA('GET', `${D}f/`)).status, 404);
});
