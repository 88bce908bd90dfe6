// CSV export and import of data-table records over HTTP on real PostgreSQL: the fixture CSVs
// imported and exported back (values round-trip), the list's filters and sort applied to the
// export, mapping and coercion, dry runs, all-or-nothing imports (validation and constraint
// failures named by row and field, across batches), header/mapping/content-type refusals,
// injection attempts, other sites, the jsonb and docstore providers, and an aborted download
// giving its database connection back.
import http from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { csvRecords, parseCsv } from '../../shared/testing/fixtures-csv.ts';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { adminsWrite, createTables, fixture, fixtureRows, seedCrm, type Row } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
let appId = 0;
const companiesCsv = readFileSync(new URL('../../fixtures/csv/companies.csv', import.meta.url), 'utf8');
const contactsCsv = readFileSync(new URL('../../fixtures/csv/contacts.csv', import.meta.url), 'utf8');
const companies = fixtureRows('companies');
const contacts = fixtureRows('contacts');
const big: TableSchema = { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: ['id'] };

const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const C = '/api/apps/crm/datatables/companies/data/';
const P = '/api/apps/crm/datatables/contacts/data/';
const D = (table: string) => `/api/apps/crm/datatables/${table}/data/`;
const onA = (method: string, path: string, body?: unknown, who = 'adminA') => s.api(method, path, { host: a.domain, token: tok[who], body });
/** POST …/data/import/ with a CSV body. */
const importCsv = (path: string, csv: string, query = '', who = 'adminA', contentType = 'text/csv') =>
  s.api('POST', `${path}import/${query}`, { host: a.domain, token: tok[who], raw: csv, headers: { 'Content-Type': contentType } });
const count = async (table: string) => Number((await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_${table}"`))[0].n);
/** The exported CSV as typed records (the fixture reader applied to it). */
function typed(text: string, schema: TableSchema): Row[] {
  const file = join(mkdtempSync(join(tmpdir(), 'csv-')), 'export.csv');
  writeFileSync(file, text);
  return csvRecords(file, schema);
}
const iso = (v: unknown) => (typeof v === 'string' ? new Date(v).toISOString() : v);

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a, b], ['flat_table', 'jsonb', 'docstore']);
  await createTables(onA, [
    ['flat_table', 'companies', fixture('companies.json')],
    ['flat_table', 'contacts', fixture('contacts.json')],
    ['flat_table', 'big', big],
    ['jsonb', 'events', fixture('events.jsonb.json')],
    ['docstore', 'notes', fixture('notes.docstore.json')],
  ]);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('import: the fixture CSVs load as typed records (integers, numbers, booleans, datetimes, JSON arrays and objects)', async (t) => {
  const c = await importCsv(C, companiesCsv);
  t.is(c.status, 200, c.text);
  t.deepEqual(c.body, { dry_run: false, delimiter: ',', encoding: 'utf-8', total_rows: companies.length, created: companies.length, failed: 0, errors: [] });
  const p = await importCsv(P, contactsCsv);
  t.is(p.status, 200, p.text);
  t.like(p.body, { total_rows: contacts.length, created: contacts.length, failed: 0 });
  const one = await onA('GET', `${C}1/`);
  t.like(one.body.data, { id: 1, name: 'Acme Robotics', employees: 2100, is_public: false, revenue: 355643735.03, updated: '2026-02-27T09:15:00.000Z' });
  const first = await onA('GET', `${P}1/`);
  t.deepEqual(first.body.data.tags, ['vip', 'churn-risk']);
  t.deepEqual(first.body.data.preferences, { newsletter: true });
  t.is(first.body.data.birthday, '1984-03-21');
  const list = await onA('GET', `${C}?page_size=1000`);
  t.deepEqual(list.body.data.map((r: Row) => ({ ...r, updated: r.updated })), companies.map((r) => ({ ...r, updated: iso(r.updated) })));
});

test.serial('export: text/csv attachment, header in schema order, every row, values round-trip', async (t) => {
  const res = await onA('GET', `${C}?format=csv`, undefined, 'pleb');
  t.is(res.status, 200, res.text);
  t.is(res.headers.get('content-type'), 'text/csv; charset=utf-8');
  t.is(res.headers.get('content-disposition'), 'attachment; filename="companies.csv"');
  const [header, ...body] = parseCsv(res.text);
  t.deepEqual(header, fixture('companies.json').fields.map((f) => f.name));
  t.is(body.length, companies.length, 'every row, no pagination');
  t.deepEqual(typed(res.text, fixture('companies.json')), companies.map((r) => ({ ...r, updated: iso(r.updated) })));
  // null → empty cell, booleans true/false, JSON for arrays and objects
  t.true(body.every((cells) => ['true', 'false'].includes(cells[header!.indexOf('is_public')]!)));
  const p = await onA('GET', `${P}?format=csv`);
  t.deepEqual(typed(p.text, fixture('contacts.json')), contacts);
  const [ph, ...prows] = parseCsv(p.text);
  const nulls = contacts.flatMap((r) => Object.keys(r).filter((f) => r[f] === null).map((f) => [r.id, f] as const));
  t.true(nulls.length > 0);
  for (const [id, f] of nulls) t.is(prows.find((cells) => cells[0] === String(id))![ph!.indexOf(f)], '', `null → empty cell (${id}.${f})`);
  t.true(p.text.includes('"[""vip"",""churn-risk""]"'));
});

test.serial('export: the list conditions, search and _sort apply; pagination parameters do not', async (t) => {
  const expected = companies.filter((r) => r.industry === 'software' && r.employees >= 100).sort((x, y) => y.employees - x.employees || x.id - y.id).map((r) => String(r.id));
  const res = await onA('GET', `${C}?format=csv&industry=software&employees__gte=100&_sort=-employees&page_size=2&page=2`);
  t.is(res.status, 200, res.text);
  t.deepEqual(parseCsv(res.text).slice(1).map((r) => r[0]), expected);
  const search = await onA('GET', `${C}?format=csv&search=acme`);
  t.deepEqual(parseCsv(search.text).slice(1).map((r) => r[1]), companies.filter((r) => /acme/i.test(r.name)).map((r) => r.name));
  const none = await onA('GET', `${C}?format=csv&id=99999`);
  t.is(none.status, 200);
  t.is(parseCsv(none.text).length, 1, 'only the header');
  for (const q of ['nope=1', 'employees__gt=many', '_sort=nope', '_aggregate=count', 'populate=*']) {
    const bad = await onA('GET', `${C}?format=csv&${q}`);
    t.is(bad.status, 400, q);
    t.regex(bad.headers.get('content-type') ?? '', /json/, q);
  }
});

test.serial('export: other sites and anonymous callers get nothing', async (t) => {
  t.is((await s.api('GET', `${C}?format=csv`, { host: a.domain })).status, 401);
  const cross = await s.api('GET', `${C}?format=csv`, { host: a.domain, token: tok.adminB });
  t.not(cross.status, 200, 'a B token on A');
  t.false(cross.text.includes('Acme'));
  t.is((await s.api('GET', `${C}?format=csv`, { host: b.domain, token: tok.adminB })).status, 404, "B's app has no such table");
});

test.serial('import: mapping renames columns, cells are coerced (trimmed numbers, TRUE/0 booleans, offsets in datetimes, empty → default)', async (t) => {
  const csv = [
    'Company ID,Company,Staff,Public,Revenue,updated,country',
    '1001,New Co, 12 ,TRUE,12.5,2026-03-01T10:00:00+02:00,',
    '1002,"Quoted, Inc.",0,0,,,FR',
    '1003,"Multi ""line""\nname",7,false,1e3,2026-03-02T00:00:00Z,DE',
  ].join('\r\n');
  const mapping = encodeURIComponent(JSON.stringify({ 'Company ID': 'id', Company: 'name', Staff: 'employees', Public: 'is_public', Revenue: 'revenue' }));
  const res = await importCsv(C, csv, `?mapping=${mapping}`);
  t.is(res.status, 200, res.text);
  t.like(res.body, { total_rows: 3, created: 3, failed: 0 });
  t.like((await onA('GET', `${C}1001/`)).body.data, { name: 'New Co', employees: 12, is_public: true, revenue: 12.5, updated: '2026-03-01T08:00:00.000Z', country: 'US' });
  t.like((await onA('GET', `${C}1002/`)).body.data, { name: 'Quoted, Inc.', employees: 0, is_public: false, revenue: null, updated: null, country: 'FR' });
  t.like((await onA('GET', `${C}1003/`)).body.data, { name: 'Multi "line"\nname', revenue: 1000 });
});

test.serial('import: dry_run validates and checks constraints, writes nothing, reports what would be created', async (t) => {
  const before = await count('companies');
  const ok = await importCsv(C, 'id,name\n2001,Dry One\n2002,Dry Two\n', '?dry_run=true');
  t.is(ok.status, 200, ok.text);
  t.deepEqual(ok.body, { dry_run: true, delimiter: ',', encoding: 'utf-8', total_rows: 2, created: 2, failed: 0, errors: [] });
  t.is(await count('companies'), before);
  t.is((await onA('GET', `${C}2001/`)).status, 404);
  const dup = await importCsv(C, 'id,name\n2001,Dry One\n1,Duplicate\n', '?dry_run=1');
  t.is(dup.status, 200, 'a dry run answers its report, failing rows or not');
  t.like(dup.body, { dry_run: true, total_rows: 2, created: 0, failed: 1 });
  t.is(dup.body.errors[0].row, 2);
  t.truthy(dup.body.errors[0].errors.id);
  t.is(await count('companies'), before);
});

test.serial('import: one bad row → nothing written, the report names each failing row and field', async (t) => {
  const before = await count('companies');
  const csv = 'id,name,employees,email,industry\n3001,Good,1,,\n3002,Bad Count,many,,\n3003,Bad Mail,2,not-an-email,piracy\n3004,,3,,\n3005,Short\n3006,Fine,4,,\n';
  const res = await importCsv(C, csv);
  t.is(res.status, 400, res.text);
  t.like(res.body, { code: 'VALIDATION_ERROR', message: '4 of 6 rows failed; nothing was imported.' });
  t.like(res.body.data, { dry_run: false, total_rows: 6, created: 0, failed: 4 });
  const byRow = Object.fromEntries(res.body.data.errors.map((e: Row) => [e.row, e.errors]));
  t.deepEqual(Object.keys(byRow).map(Number), [2, 3, 4, 5]);
  t.regex(byRow[2].employees[0], /integer/);
  t.truthy(byRow[3].email);
  t.truthy(byRow[3].industry);
  t.truthy(byRow[4].name, 'an empty required cell');
  t.regex(byRow[5].non_field_errors[0], /Expected 5 cells/);
  t.is(await count('companies'), before);
  t.is((await onA('GET', `${C}3001/`)).status, 404);
});

test.serial('import: a constraint violation (duplicate key, unique field, foreign key) rolls everything back and names its row', async (t) => {
  const before = await count('companies');
  const dup = await importCsv(C, 'id,name\n4001,Fine\n4002,Fine Too\n1,Duplicate of an existing key\n');
  t.is(dup.status, 400, dup.text);
  t.like(dup.body.data, { total_rows: 3, created: 0, failed: 1 });
  t.deepEqual(dup.body.data.errors, [{ row: 3, errors: { id: ['A record with this value already exists.'] } }]);
  const twice = await importCsv(C, `id,name,domain\n4003,A,x.example\n4004,B,x.example\n`);
  t.deepEqual(twice.body.data.errors, [{ row: 2, errors: { domain: ['Duplicate: row 1 has the same value (unique index domain_unique).'] } }], 'duplicates inside the CSV');
  t.is(await count('companies'), before);
  t.is((await onA('GET', `${C}4001/`)).status, 404);
  const fk = await importCsv(P, 'id,first_name,last_name,email,company_id\n900,A,B,a900@x.example,1\n901,C,D,c901@x.example,99999\n');
  t.like(fk.body.data, { created: 0, failed: 1 });
  t.deepEqual(fk.body.data.errors[0], { row: 2, errors: { company_id: ['The referenced record does not exist.'] } });
  t.is((await onA('GET', `${P}900/`)).status, 404);
});

test.serial('import: many batches in one transaction; a violation in the last batch rolls back the first ones', async (t) => {
  const lines = (from: number, n: number) => Array.from({ length: n }, (_, i) => `${from + i},row ${from + i}`);
  const failing = await importCsv(D('big'), ['id,label', ...lines(1, 12_000), '1,again'].join('\n'));
  t.is(failing.status, 400, failing.text);
  t.like(failing.body.data, { total_rows: 12_001, created: 0, failed: 1 });
  t.deepEqual(failing.body.data.errors, [{ row: 12_001, errors: { id: ['Duplicate: row 1 has the same value.'] } }]);
  t.is(await count('big'), 0);
  const ok = await importCsv(D('big'), ['id,label', ...lines(1, 12_000)].join('\n'));
  t.like(ok.body, { total_rows: 12_000, created: 12_000, failed: 0 });
  t.is(await count('big'), 12_000);
  // Many failing rows: all counted, the first 100 listed.
  const bad = await importCsv(D('big'), ['id,label', ...Array.from({ length: 150 }, (_, i) => `x${i},bad`)].join('\n'));
  t.like(bad.body.data, { total_rows: 150, failed: 150, created: 0 });
  t.is(bad.body.data.errors.length, 100);
});

test.serial('import: unknown headers, bad mappings and options → 400 before anything is written; other media types → 415', async (t) => {
  const before = await count('companies');
  const unknown = await importCsv(C, 'id,name,colour,size\n5001,X,red,2\n');
  t.is(unknown.status, 400, unknown.text);
  t.regex(unknown.body.errors.header[0], /"colour", "size"/);
  const target = await importCsv(C, 'id,Name\n5001,X\n', `?mapping=${encodeURIComponent('{"Name":"title"}')}`);
  t.is(target.status, 400);
  t.regex(target.body.errors.mapping[0], /unknown field "title"/);
  const absent = await importCsv(C, 'id,name\n5001,X\n', `?mapping=${encodeURIComponent('{"Nom":"name"}')}`);
  t.is(absent.status, 400);
  const twice = await importCsv(C, 'id,name,Name\n5001,X,Y\n', `?mapping=${encodeURIComponent('{"Name":"name"}')}`);
  t.is(twice.status, 400);
  t.regex(twice.body.errors.header[0], /"name"/);
  for (const q of ['?mapping=not-json', `?mapping=${encodeURIComponent('["id"]')}`, `?mapping=${encodeURIComponent('{"a":1}')}`, '?dry_run=maybe']) {
    t.is((await importCsv(C, 'id,name\n5001,X\n', q)).status, 400, q);
  }
  const empty = await importCsv(C, '');
  t.is(empty.status, 400, empty.text);
  t.is((await importCsv(C, 'id,name\n5001,"unterminated\n')).status, 400);
  const json = await importCsv(C, JSON.stringify([{ id: 5001, name: 'X' }]), '', 'adminA', 'application/json');
  t.is(json.status, 415, json.text);
  t.is((await importCsv(C, 'id,name\n5001,X\n', '', 'adminA', 'text/plain')).status, 415);
  t.is(await count('companies'), before);
});

test.serial('import: refused when the policies refuse a row; other sites cannot reach the table', async (t) => {
  await adminsWrite(onA, 'companies');
  t.is((await importCsv(C, 'id,name\n6001,X\n', '', 'pleb')).status, 403);
  t.not((await s.api('POST', `${C}import/`, { host: a.domain, token: tok.adminB, raw: 'id,name\n6001,X\n', headers: { 'Content-Type': 'text/csv' } })).status, 200);
  t.is((await s.api('POST', `${C}import/`, { host: b.domain, token: tok.adminB, raw: 'id,name\n6001,X\n', headers: { 'Content-Type': 'text/csv' } })).status, 404);
  t.is((await onA('GET', `${C}6001/`)).status, 404);
});

test.serial('injection attempts in headers, mapping and cells are refused or bound; tables intact', async (t) => {
  const before = await count('companies');
  const evilHeader = await importCsv(C, `id,"name""; DROP TABLE x; --"\n7001,X\n`);
  t.is(evilHeader.status, 400);
  const evilMap = await importCsv(C, 'id,n\n7001,X\n', `?mapping=${encodeURIComponent(JSON.stringify({ n: 'name"; DROP TABLE x; --' }))}`);
  t.is(evilMap.status, 400);
  const evilKey = await importCsv(C, 'id,"x) VALUES (1); --"\n7001,X\n', `?mapping=${encodeURIComponent(JSON.stringify({ 'x) VALUES (1); --': 'name' }))}`);
  t.is(evilKey.status, 200, 'a mapped header is only a label');
  const value = `x'); DROP TABLE "${a.schema}"."a${appId}_companies"; --`;
  const quoted = `"${value.replaceAll('"', '""')}"`;
  const cells = await importCsv(C, `id,name,employees\n7002,${quoted},1\n7003,Y,"1; DROP TABLE x"\n`);
  t.like(cells.body.data, { created: 0, failed: 1 });
  t.is(cells.body.data.errors[0].row, 2);
  const stored = await importCsv(C, `id,name\n7002,${quoted}\n`);
  t.like(stored.body, { created: 1 });
  t.is((await onA('GET', `${C}7002/`)).body.data.name, value);
  const exported = await onA('GET', `${C}?format=csv&id=7002`);
  t.is(parseCsv(exported.text)[1]![1], value);
  t.is(await count('companies'), before + 2);
  t.truthy((await sql('SELECT to_regclass(?) AS r', [`"${a.schema}"."a${appId}_companies"`]))[0].r);
});

test.serial('jsonb and docstore tables round-trip: export, import of the export, same records', async (t) => {
  const events = [
    { event_type: 'page_view', occurred_at: '2026-01-01T10:00:00Z', payload: { path: '/pricing', ms: 120 } },
    { event_type: 'signup', occurred_at: '2026-01-03T10:00:00Z', user_ref: '2b0c6f0e-8f5d-4a43-9d7e-3f1c2a4b5c6d' },
  ];
  t.is((await onA('POST', D('events'), events)).status, 201);
  const ev = await onA('GET', `${D('events')}?format=csv&_sort=occurred_at`);
  t.is(ev.status, 200, ev.text);
  const evRows = parseCsv(ev.text);
  t.deepEqual(evRows[0], ['id', 'event_type', 'occurred_at', 'user_ref', 'payload']);
  t.is(evRows[1]![4], '{"ms":120,"path":"/pricing"}');
  t.is(evRows[2]![4], '');
  const evBefore = (await onA('GET', `${D('events')}?_sort=occurred_at`)).body.data;
  await sql(`DELETE FROM "${a.schema}"."a${appId}_events"`);
  const evBack = await importCsv(D('events'), ev.text);
  t.like(evBack.body, { created: 2, failed: 0 }, evBack.text);
  t.deepEqual((await onA('GET', `${D('events')}?_sort=occurred_at`)).body.data, evBefore, 'ids kept, JSON objects parsed back');

  const notes = [{ title: 'Hello, world', body: 'line one\nline "two"', tags: ['a', 'b'], pinned: true, extra: { kept: 'in the document' } }, { title: 'Second' }];
  t.is((await onA('POST', D('notes'), notes)).status, 201);
  const nt = await onA('GET', `${D('notes')}?format=csv&_sort=title`);
  const ntRows = parseCsv(nt.text);
  t.deepEqual(ntRows[0], ['id', 'title', 'body', 'tags', 'pinned'], 'id and the schema fields; extra document fields are not exported');
  t.deepEqual(ntRows[1]!.slice(1), ['Hello, world', 'line one\nline "two"', '["a","b"]', 'true']);
  t.deepEqual(ntRows[2]!.slice(1), ['Second', '', '', ''], 'fields absent from the document: empty cells');
  const ntBefore = ((await onA('GET', `${D('notes')}?_sort=title`)).body.data as Row[]).map(({ extra: _extra, created_at: _c, updated_at: _u, ...r }) => r);
  await sql(`DELETE FROM "${a.schema}"."a${appId}_notes"`);
  const ntBack = await importCsv(D('notes'), nt.text);
  t.like(ntBack.body, { created: 2, failed: 0 }, ntBack.text);
  const after = ((await onA('GET', `${D('notes')}?_sort=title`)).body.data as Row[]).map(({ created_at: _c, updated_at: _u, ...r }) => r);
  t.deepEqual(after, ntBefore);
});

/** Open connections of the test database that are not idle (a cursor left open would be "idle in transaction" or "active"). */
const busyBackends = async () =>
  Number((await sql(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' AND query ILIKE ?`, [`%a${appId}_big%`]))[0].n);

test.serial('an aborted export stops reading and releases its connection; the pool keeps serving', async (t) => {
  await sql(`INSERT INTO "${a.schema}"."a${appId}_big" (id, label) SELECT g, repeat('x', 200) || g FROM generate_series(20001, 220000) g`);
  const url = new URL(`${D('big')}?format=csv`, s.url);
  const received = await new Promise<number>((resolve, reject) => {
    const req = http.request(url, { headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}` }, agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > 100_000) {
          req.destroy();
          resolve(bytes);
        }
      });
      res.on('end', () => reject(new Error('the whole export was read')));
    });
    req.on('error', () => undefined);
    req.end();
  });
  t.true(received > 100_000);
  let busy = -1;
  for (let i = 0; i < 50 && busy !== 0; i++) {
    busy = await busyBackends();
    if (busy) await new Promise((r) => setTimeout(r, 100));
  }
  t.is(busy, 0, 'no backend left inside the export');
  // The pool still serves: more exports than the pool has connections, one after the other.
  for (let i = 0; i < 25; i++) t.is((await onA('GET', `${D('big')}?format=csv&id__lte=3`)).status, 200);
  const full = await onA('GET', `${D('big')}?format=csv`);
  t.is(parseCsv(full.text).length, 1 + 212_000);
});

test.serial('import: a body declared larger than the limit → 413 before it is read', async (t) => {
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.request(new URL(`${C}import/`, s.url), {
      method: 'POST',
      agent: false,
      headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'text/csv', 'Content-Length': String(300 * 1024 * 1024) },
    }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    req.write('id,name\n');
  });
  t.is(status, 413);
});

test.serial('issue 30 #7: an import into a table not materialized names the command that materializes it; nothing is made', async (t) => {
  const made = await onA('POST', '/api/apps/crm/datasources/flat_table/datatables/', { name: 'later_import', json_schema: { fields: [{ name: 'n', type: 'integer' }] } });
  t.is(made.status, 201, made.text);
  const res = await importCsv('/api/apps/crm/datatables/later_import/data/', 'n\n1\n');
  t.is(res.status, 400, res.text);
  t.is(
    res.body.message,
    `Data table "later_import" is not materialized: it has no records until it is (\`platform table materialize later_import --app crm --site ${a.schema}\`, or POST /api/apps/crm/datatables/later_import/materialize/).`,
  );
  const table = await onA('GET', '/api/apps/crm/datatables/later_import/');
  t.is(table.body.is_materialized, false, table.text);
});
