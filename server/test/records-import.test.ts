// CSV import, issue 30 #5: one run reports every problem of a file — invalid values, references
// to missing records, duplicate keys within the file (primary key, unique field, unique index on
// an expression) and keys the table already holds — with row numbers, in one 400, nothing
// stored; across batches too (after a first batch was inserted); jsonb and docstore keys; a
// reference to the same table; a constraint the checks do not know (the batch replayed). The
// delimiter sniffed from the header (`;`, tab) or given; the encoding: UTF-8 checked (the first bad
// byte named), latin1 and UTF-16 decoded. Another site's token reaches nothing.
import test from 'ava';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm, type Row } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
let appId = 0;

const regions: TableSchema = { fields: [{ name: 'code', type: 'string' }, { name: 'name', type: 'string' }], primaryKey: 'code' };
const clients: TableSchema = {
  fields: [
    { name: 'id', type: 'integer' },
    { name: 'name', type: 'string', constraints: { required: true } },
    { name: 'email', type: 'string', constraints: { unique: true } },
    { name: 'vat', type: 'string' },
    { name: 'score', type: 'number' },
    { name: 'region', type: 'string' },
    { name: 'joined', type: 'date' },
  ],
  primaryKey: 'id',
  foreignKeys: [{ fields: ['region'], reference: { resource: 'regions', fields: ['code'] } }],
  indexes: [{ name: 'vat_lower', expression: 'lower(vat)', unique: true }],
};
const visits: TableSchema = {
  fields: [{ name: 'code', type: 'string' }, { name: 'email', type: 'string', constraints: { unique: true } }, { name: 'n', type: 'integer' }],
  primaryKey: 'code',
};
const staff: TableSchema = {
  fields: [{ name: 'id', type: 'integer' }, { name: 'manager', type: 'integer' }, { name: 'age', type: 'integer' }],
  primaryKey: 'id',
  foreignKeys: [{ fields: ['manager'], reference: { resource: '', fields: ['id'] } }],
};
const HEADER = 'id,name,email,vat,score,region,joined';
const C = '/api/apps/crm/datatables/clients/data/';

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const onA = (method: string, path: string, body?: unknown) => s.api(method, path, { host: a.domain, token: tok.adminA, body });
const importCsv = (csv: string | Buffer, query = '', who = 'adminA', host = () => a.domain, path = C) =>
  s.api('POST', `${path}import/${query}`, { host: host(), token: tok[who], raw: csv, headers: { 'Content-Type': 'text/csv' } });
const count = async () => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_clients"`))[0].n);
const row = (id: number, extra = '') => `${id},Client ${id},c${id}@x.example,V${id},1,EU,2024-01-02${extra}`;

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a, b], ['flat_table', 'jsonb', 'docstore']);
  await createTables(onA, [['flat_table', 'regions', regions], ['flat_table', 'clients', clients], ['jsonb', 'visits', visits], ['docstore', 'memos', { fields: [{ name: 'title', type: 'string' }] }], ['flat_table', 'staff', staff]]);
  const seeded = await onA('POST', '/api/apps/crm/datatables/regions/data/', [{ code: 'EU', name: 'Europe' }, { code: 'US', name: 'United States' }]);
  if (seeded.status !== 201) throw new Error(seeded.text);
  const existing = await onA('POST', C, { id: 1, name: 'Existing', email: 'existing@x.example', vat: 'FR1', region: 'EU' });
  if (existing.status !== 201) throw new Error(existing.text);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('one bad file: every error class in one 400, with row numbers and fields; nothing stored', async (t) => {
  const csv = [
    HEADER,
    '10,Good,good@x.example,AB1,1.5,EU,2024-01-02',
    '11,Bad Score,b11@x.example,AB11,lots,EU,2024-01-02', // a value that does not coerce
    '12,No Region,b12@x.example,AB12,2,XX,2024-01-02', // a reference to a missing record
    '13,Same Mail,good@x.example,AB13,3,US,2024-01-02', // the unique field as row 1
    '1,Key Taken,b14@x.example,AB14,4,US,2024-01-02', // the primary key of a stored record
    '15,Mail Taken,existing@x.example,AB15,5,EU,2024-01-02', // the unique field of a stored record
    '10,Twice,b16@x.example,AB16,6,ZZ,not-a-date', // the key of row 1, a missing region and a bad date
    '17,Vat Case,b17@x.example,ab1,7,US,2024-01-02', // lower(vat) as row 1's
    '18,Vat Taken,b18@x.example,fr1,8,US,2024-01-02', // lower(vat) of a stored record
    '19,Fine,b19@x.example,AB19,9,US,2024-01-02',
  ].join('\n');
  const before = await count();
  const res = await importCsv(csv);
  t.is(res.status, 400, res.text);
  t.is(res.body.code, 'VALIDATION_ERROR');
  t.is(res.body.message, '8 of 10 rows failed; nothing was imported.');
  t.deepEqual(res.body.data, {
    dry_run: false,
    delimiter: ',',
    encoding: 'utf-8',
    total_rows: 10,
    created: 0,
    failed: 8,
    errors: [
      { row: 2, errors: { score: ['Invalid number "lots".'] } },
      { row: 3, errors: { region: ['The referenced record does not exist.'] } },
      { row: 4, errors: { email: ['Duplicate: row 1 has the same value.'] } },
      { row: 5, errors: { id: ['A record with this value already exists.'] } },
      { row: 6, errors: { email: ['A record with this value already exists.'] } },
      { row: 7, errors: { joined: ['must match format "date"'], id: ['Duplicate: row 1 has the same value.'], region: ['The referenced record does not exist.'] } },
      { row: 8, errors: { vat: ['Duplicate: row 1 has the same value (unique index vat_lower).'] } },
      { row: 9, errors: { vat: ['A record with this value already exists (unique index vat_lower).'] } },
    ],
  });
  t.is(await count(), before, 'nothing stored');
  t.is((await onA('GET', `${C}10/`)).status, 404);
  t.is((await onA('GET', `${C}19/`)).status, 404);

  // A dry run answers the same report with 200.
  const dry = await importCsv(csv, '?dry_run=true');
  t.is(dry.status, 200, dry.text);
  t.deepEqual(dry.body, { ...res.body.data, dry_run: true });
  t.is(await count(), before);
});

test.serial('across batches: a first batch inserted, then a rejected one and a third; every error reported, nothing stored', async (t) => {
  const lines = Array.from({ length: 12_000 }, (_, i) => row(100 + i));
  lines[5999] = row(6099).replace(',EU,', ',XX,'); // batch 2: the database refuses its insert
  lines[10_999] = row(102).replace('c102@', 'c11099@').replace('V102', 'V11099'); // batch 3: row 3's key
  lines[11_499] = row(1).replace('c1@', 'c11599@').replace('V1,', 'V11599,'); // batch 3: a stored key
  lines[6999] = row(7099).replace('V7099', 'Q7'); // batch 2
  lines[11_999] = row(12_099).replace('c12099@', 'c100@').replace('V12099', 'q7'); // batch 3: row 1's e-mail, row 7000's vat (lower)
  const before = await count();
  const res = await importCsv([HEADER, ...lines].join('\n'));
  t.is(res.status, 400, res.text);
  t.deepEqual(res.body.data.errors, [
    { row: 6000, errors: { region: ['The referenced record does not exist.'] } },
    { row: 11_000, errors: { id: ['Duplicate: row 3 has the same value.'] } },
    { row: 11_500, errors: { id: ['A record with this value already exists.'] } },
    { row: 12_000, errors: { email: ['Duplicate: row 1 has the same value.'], vat: ['Duplicate: row 7000 has the same value (unique index vat_lower).'] } },
  ]);
  t.like(res.body.data, { total_rows: 12_000, created: 0, failed: 4 });
  t.is(await count(), before, 'the first batch, inserted, rolled back');
});

test.serial('delimiter: sniffed from the header (";" and tab), or given; a wrong one names itself in the header error', async (t) => {
  const semicolon = await importCsv('id;name;score\n201;Semi, Colon;1.5\n', '?dry_run=true');
  t.is(semicolon.status, 200, semicolon.text);
  t.like(semicolon.body, { delimiter: ';', total_rows: 1, created: 1, failed: 0 });
  const tab = await importCsv('id\tname\tscore\n202\tTab, with a comma\t2\n203\tOther\t3\n');
  t.is(tab.status, 200, tab.text);
  t.like(tab.body, { delimiter: '\t', created: 2 });
  t.is((await onA('GET', `${C}202/`)).body.data.name, 'Tab, with a comma');
  const pipe = await importCsv('id|name\n204|Pipe, Inc.\n', `?delimiter=${encodeURIComponent('|')}`);
  t.like(pipe.body, { delimiter: '|', created: 1 });
  const named = await importCsv('id\tname\n205\tNamed tab\n', '?delimiter=tab');
  t.like(named.body, { delimiter: '\t', created: 1 });
  // A tie or no candidate at all: the comma.
  t.like((await importCsv('id\n206\n', '?dry_run=1')).body, { delimiter: ',' });
  const wrong = await importCsv('id,name\n207,X\n', '?delimiter=;');
  t.is(wrong.status, 400, wrong.text);
  t.regex(wrong.body.errors.header[0], /Unknown column "id,name".*read with the delimiter ";"; give delimiter= if the file uses another\./);
  for (const q of ['?delimiter=ab', `?delimiter=${encodeURIComponent('"')}`]) {
    const bad = await importCsv('id,name\n208,X\n', q);
    t.is(bad.status, 400, q);
    t.truthy(bad.body.errors.delimiter, q);
  }
  t.is((await onA('GET', `${C}207/`)).status, 404);
});

test.serial('encoding: invalid UTF-8 → 400 naming it (byte offset, line); latin1 when given; a UTF-8 BOM dropped; UTF-16 by its BOM', async (t) => {
  const before = await count();
  const latin1 = Buffer.concat([Buffer.from('id,name\n301,Caf'), Buffer.from([0xe9]), Buffer.from('\n302,Zo'), Buffer.from([0xeb]), Buffer.from('\n')]);
  const bad = await importCsv(latin1);
  t.is(bad.status, 400, bad.text);
  const text = 'The file is not valid UTF-8 (byte offset 15, line 2): save it as UTF-8, or give its encoding (encoding=latin1 for Latin-1/Windows-1252; CLI --encoding latin1).';
  t.like(bad.body, { code: 'VALIDATION_ERROR', message: text, errors: { encoding: [text] } });
  t.is(await count(), before);
  const ok = await importCsv(latin1, '?encoding=latin1');
  t.is(ok.status, 200, ok.text);
  t.like(ok.body, { encoding: 'windows-1252', created: 2 });
  t.is((await onA('GET', `${C}301/`)).body.data.name, 'Café');
  t.is((await onA('GET', `${C}302/`)).body.data.name, 'Zoë');
  // A character split between two chunks of the stream is still one character.
  const long = `id,name\n303,${'é'.repeat(70_000)}\n`;
  t.like((await importCsv(Buffer.from(long), '?dry_run=1')).body, { encoding: 'utf-8', created: 1 });
  const bom = await importCsv(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('id,name\n304,Bom\n')]));
  t.like(bom.body, { encoding: 'utf-8', created: 1 });
  const utf16 = await importCsv(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('id\tname\n305\tÜnïcödé\n', 'utf16le')]));
  t.is(utf16.status, 200, utf16.text);
  t.like(utf16.body, { encoding: 'utf-16le', delimiter: '\t', created: 1 });
  t.is((await onA('GET', `${C}305/`)).body.data.name, 'Ünïcödé');
  const cut = await importCsv(Buffer.concat([Buffer.from('id,name\n306,X'), Buffer.from([0xc3])]));
  t.is(cut.status, 400);
  t.regex(cut.body.message, /not valid UTF-8 \(byte offset 13, line 2\)/);
  const unknown = await importCsv('id,name\n307,X\n', '?encoding=klingon');
  t.is(unknown.status, 400);
  t.regex(unknown.body.errors.encoding[0], /Unknown encoding "klingon"/);
});

test.serial('another site: its token reaches nothing, its own app has no such table', async (t) => {
  const before = await count();
  t.not((await importCsv(`${HEADER}\n${row(401)}\n`, '', 'adminB')).status, 200);
  t.is((await importCsv(`${HEADER}\n${row(402)}\n`, '', 'adminB', () => b.domain)).status, 404);
  t.is(await count(), before);
});

test.serial('the fields of a failing row are still checked against the table: a bad value and a missing reference in one row', async (t) => {
  const res = await importCsv(`${HEADER}\n501,,c501@x.example,V501,x,XX,2024-01-02\n`);
  t.is(res.status, 400);
  t.deepEqual((res.body.data.errors as Row[])[0]!.errors, { name: ['This field is required.'], score: ['Invalid number "x".'], region: ['The referenced record does not exist.'] });
});

test.serial('jsonb and docstore tables: keys within the file and in the table, in one run', async (t) => {
  const V = '/api/apps/crm/datatables/visits/data/';
  const M = '/api/apps/crm/datatables/memos/data/';
  t.is((await onA('POST', V, { code: 'A', email: 'a@x.example', n: 1 })).status, 201);
  const visits = await importCsv('code,email,n\nB,b@x.example,1\nC,b@x.example,2\nA,c@x.example,3\nD,a@x.example,x\n', '', 'adminA', () => a.domain, V);
  t.is(visits.status, 400, visits.text);
  t.deepEqual(visits.body.data.errors, [
    { row: 2, errors: { email: ['Duplicate: row 1 has the same value.'] } },
    { row: 3, errors: { code: ['A record with this value already exists.'] } },
    { row: 4, errors: { n: ['Invalid integer "x".'], email: ['A record with this value already exists.'] } },
  ]);
  t.is((await onA('GET', V)).body.total, 1);
  const memo = await onA('POST', M, { title: 'Kept' });
  t.is(memo.status, 201, memo.text);
  const id = memo.body.data.id as string;
  const other = '2b0c6f0e-8f5d-4a43-9d7e-3f1c2a4b5c6d';
  const memos = await importCsv(`id,title\n${id},Again\n${other},New\n${other},Twice\n,No id\n`, '', 'adminA', () => a.domain, M);
  t.is(memos.status, 400, memos.text);
  t.deepEqual(memos.body.data.errors, [
    { row: 1, errors: { id: ['A record with this value already exists.'] } },
    { row: 3, errors: { id: ['Duplicate: row 2 has the same value.'] } },
  ]);
  t.is((await onA('GET', M)).body.total, 1);
});

test.serial('a constraint the checks do not know (added to the physical table by hand): the rejected batch is replayed to name its row', async (t) => {
  const table = `"${a.schema}"."a${appId}_clients"`;
  await sql(`ALTER TABLE ${table} ADD CONSTRAINT by_hand CHECK (score <> 13)`);
  try {
    const res = await importCsv(`${HEADER}\n${row(601)}\n${row(602).replace(',1,EU,', ',13,EU,')}\n`);
    t.is(res.status, 400, res.text);
    t.deepEqual(res.body.data.errors, [{ row: 2, errors: { non_field_errors: ['The value violates a constraint of the table.'] } }]);
    t.is((await onA('GET', `${C}601/`)).status, 404);
  } finally {
    await sql(`ALTER TABLE ${table} DROP CONSTRAINT by_hand`);
  }
});

test.serial('a reference to the same table: satisfied by a stored record or a row of the file (later in the same batch too)', async (t) => {
  const S = '/api/apps/crm/datatables/staff/data/';
  t.is((await onA('POST', S, { id: 1 })).status, 201);
  const res = await importCsv('id,manager,age\n10,11,30\n11,1,40\n12,99,50\n13,10,old\n', '', 'adminA', () => a.domain, S);
  t.is(res.status, 400, res.text);
  t.deepEqual(res.body.data.errors, [
    { row: 3, errors: { manager: ['The referenced record does not exist.'] } },
    { row: 4, errors: { age: ['Invalid integer "old".'] } },
  ]);
  const fixed = await importCsv('id,manager,age\n10,11,30\n11,1,40\n13,10,60\n', '', 'adminA', () => a.domain, S);
  t.is(fixed.status, 200, fixed.text);
  t.like(fixed.body, { created: 3, failed: 0 });
});
