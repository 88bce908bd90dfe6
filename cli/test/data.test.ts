// `platform data …` in both modes (remote: <api-url>/sites/<schema>/api/… with the site's
// login; direct: the site schema as the system actor): the same output, and the records
// really changed (read back through the API).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { csvRecords } from '../../shared/testing/fixtures-csv.ts';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { logBounds } from '../../shared/realtime/changelog.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { cliEnv, json, MODES, runCli, volatile, withoutProgress, type Mode, siteWithLogin } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let tmp: string;
let admin: string;
const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures');
const schemaOf = (name: string): TableSchema => JSON.parse(fs.readFileSync(path.join(FIXTURES, 'schemas', `${name}.json`), 'utf8'));
const COMPANIES = csvRecords(path.join(FIXTURES, 'csv', 'companies.csv'), schemaOf('companies'));
const CONTACTS = csvRecords(path.join(FIXTURES, 'csv', 'contacts.csv'), schemaOf('contacts'));

const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });
const env = () => cliEnv(s, configDir);
/** `platform …args --site <schema> --app shop-<mode> [--direct]`: each mode works on its own copy of the data. */
const run = (mode: Mode, args: string[]) => runCli([...args, '--site', site.schema, '--app', `shop-${mode}`, ...(mode === 'direct' ? ['--direct'] : [])], env());
const records = async (mode: Mode, table: string, qs = '') => (await api('GET', `/api/apps/shop-${mode}/datatables/${table}/data/?page_size=1000${qs}`)).body;

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-data-test-'));
  const seed = async (method: string, p: string, body: unknown) => {
    const r = await api(method, p, body);
    if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
  };
  for (const mode of MODES) {
    const app = `/api/apps/shop-${mode}`;
    await seed('POST', '/api/apps/', { name: `Shop ${mode}` });
    await seed('POST', `${app}/datasources/`, { name: 'Main', slug: 'main', provider_type: 'flat_table' });
    for (const [name, file] of [['companies', 'companies'], ['contacts', 'contacts'], ['companies_copy', 'companies']]) {
      await seed('POST', `${app}/datasources/main/datatables/`, { name, json_schema: schemaOf(file) });
      await seed('POST', `${app}/datatables/${name}/materialize/`, undefined);
    }
    await seed('POST', `${app}/datatables/companies/data/`, COMPANIES);
    await seed('POST', `${app}/datatables/contacts/data/`, CONTACTS);
  }
});
test.after.always(async () => {
  await s?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
  fs.rmSync(tmp, { recursive: true, force: true });
});

test.serial('data list and get: filters, sort, pages; the same output in both modes', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  const big = COMPANIES.filter((c) => (c.employees as number) >= 1000).sort((a, b) => (b.employees as number) - (a.employees as number) || (b.id as number) - (a.id as number)); // ties: the key, in the last sort key's direction
  for (const mode of MODES) {
    const list = await run(mode, ['data', 'list', '--table', 'companies', '--filter', 'employees__gte=1000', '--sort', '-employees', '--page-size', '5', '--json']);
    t.is(list.code, 0, list.stderr);
    t.like(json(list), { total: big.length, page: 1, page_size: 5 });
    t.deepEqual(json(list).data.map((c: { id: number }) => c.id), big.slice(0, 5).map((c) => c.id));
    const text = await run(mode, ['data', 'list', '--table', 'companies', '--filter', 'employees__gte=1000', '--sort', '-employees', '--page-size', '5']);
    t.regex(text.stdout, /^ID +NAME +DOMAIN +WEBSITE +EMAIL +INDUSTRY +EMPLOYEES +FOUNDED +REVENUE +IS_PUBLIC +COUNTRY +UPDATED\n/);
    t.true(text.stdout.endsWith(`\n\n${big.length} records, 5 shown (page 1, 5 a page) (next: --page 2)\n`), text.stdout);
    out[mode].push(text.stdout);
    // Repeated --filter: every condition holds.
    const two = await run(mode, ['data', 'list', '--table', 'contacts', '--filter', 'status=lead', '--filter', 'id__lt=20', '--json']);
    const expected = CONTACTS.filter((c) => c.status === 'lead' && (c.id as number) < 20).map((c) => c.id);
    t.true(expected.length > 0);
    t.deepEqual(json(two).data.map((c: { id: number }) => c.id), expected);
    const one = await run(mode, ['data', 'get', '3', '--table', 'companies']);
    t.is(one.code, 0, one.stderr);
    t.regex(one.stdout, /^id: +3\nname: +Cedar Health\n/);
    out[mode].push(one.stdout);
    const contact = await run(mode, ['data', 'get', '1', '--table', 'contacts', '--json']);
    t.deepEqual(json(contact).data.tags, ['vip', 'churn-risk']);

    const badField = await run(mode, ['data', 'list', '--table', 'companies', '--filter', 'nope__gte=3']);
    t.is(badField.code, 1);
    t.is(badField.stdout, '');
    t.regex(badField.stderr, /^Error: [^\n]*\n( {2}nope(__gte)?: [^\n]+\n)+$/);
    const badValue = await run(mode, ['data', 'list', '--table', 'companies', '--filter', 'employees__gte=many', '--json']);
    t.is(badValue.code, 1);
    t.truthy(Object.keys(json(badValue).errors).find((k) => k.startsWith('employees')));
    const noEq = await run(mode, ['data', 'list', '--table', 'companies', '--filter', 'employees']);
    t.is(noEq.code, 1);
    t.is(noEq.stderr, 'Error: Invalid input.\n  filter: Expected field=value or field__op=value, got "employees".\n');
    const unknown = await run(mode, ['data', 'list', '--table', 'nope']);
    t.is(unknown.code, 1);
    t.is(unknown.stderr, 'Error: Data table "nope" not found.\n');
    const missing = await run(mode, ['data', 'get', '999', '--table', 'companies']);
    t.is(missing.code, 1);
    t.is(missing.stderr, 'Error: Record not found.\n');
  }
  t.deepEqual(out.direct.map(volatile), out.remote.map(volatile));
});

test.serial('data create, update, upsert, delete in both modes', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  const many = path.join(tmp, 'many.json');
  fs.writeFileSync(many, JSON.stringify([
    { id: 101, first_name: 'Ida', last_name: 'One', email: 'ida@example.com', status: 'lead' },
    { id: 102, first_name: 'Jon', last_name: 'Two', email: 'jon@example.com', status: 'lead' },
  ]));
  const patches = path.join(tmp, 'patches.json');
  fs.writeFileSync(patches, JSON.stringify([{ id: 101, job_title: 'CEO' }, { id: 102, job_title: 'CTO' }]));
  for (const mode of MODES) {
    const one = await run(mode, ['data', 'create', '--table', 'contacts', '--data', '{"id":100,"first_name":"Ada","last_name":"Lovelace","email":"ada@example.com","tags":["math"]}']);
    t.is(one.code, 0, one.stderr);
    t.regex(one.stdout, /^Record created\.\nid: +100\ncompany_id: +-\nfirst_name: +Ada\n/);
    t.regex(one.stdout, /^tags: +\["math"\]$/m);
    out[mode].push(one.stdout);
    const created = await run(mode, ['data', 'create', '--table', 'contacts', '--file', many]);
    t.is(created.stdout, 'Created 2 records.\n');
    const dup = await run(mode, ['data', 'create', '--table', 'contacts', '--data', '{"id":103,"first_name":"A","last_name":"B","email":"ADA@example.com"}']);
    t.is(dup.code, 1);
    t.regex(dup.stderr, /^Error: A record with this value already exists\.\n {2}email: /);
    const invalid = await run(mode, ['data', 'create', '--table', 'contacts', '--data', '{"id":104,"first_name":"A","last_name":"B","email":"nope"}', '--json']);
    t.is(invalid.code, 1);
    t.like(json(invalid), { code: 'VALIDATION_ERROR' });
    t.truthy(json(invalid).errors.email);
    const badJson = await run(mode, ['data', 'create', '--table', 'contacts', '--data', '{oops']);
    t.is(badJson.code, 1);
    t.regex(badJson.stderr, /^Error: Invalid JSON in data: [^\n]*\n {2}data: Not valid JSON\.\n$/);

    const upd = await run(mode, ['data', 'update', '100', '--table', 'contacts', '--data', '{"status":"inactive"}']);
    t.is(upd.code, 0, upd.stderr);
    t.regex(upd.stdout, /^status: +inactive$/m);
    out[mode].push(upd.stdout);
    const updMany = await run(mode, ['data', 'update', '--table', 'contacts', '--file', patches]);
    t.is(updMany.code, 0, updMany.stderr);
    t.is(updMany.stdout, 'Updated 2 records.\n');
    t.deepEqual((await records(mode, 'contacts', '&id__in=101,102')).data.map((c: { job_title: string }) => c.job_title), ['CEO', 'CTO']);

    const up1 = await run(mode, ['data', 'upsert', '--table', 'contacts', '--unique-fields', 'email', '--data', '{"id":105,"first_name":"Eve","last_name":"New","email":"eve@example.com"}', '--json']);
    t.is(up1.code, 0, up1.stderr);
    t.like(json(up1), { created: true, data: { id: 105, first_name: 'Eve' } });
    const up2 = await run(mode, ['data', 'upsert', '--table', 'contacts', '--unique-fields', 'email', '--data', '{"id":105,"first_name":"Eva","last_name":"New","email":"eve@example.com"}']);
    t.is(up2.code, 0, up2.stderr);
    t.regex(up2.stdout, /^Record updated\.\nid: +105\n(.*\n)*first_name: +Eva\n/);

    const del = await run(mode, ['data', 'delete', '105', '--table', 'contacts', '--json']);
    t.is(del.code, 0, del.stderr);
    t.deepEqual(json(del), { status: 'success', message: 'Record 105 deleted.' });
    t.is((await api('GET', `/api/apps/shop-${mode}/datatables/contacts/data/105/`)).status, 404);
    const ids = await run(mode, ['data', 'delete', '--ids', '101,102,999', '--table', 'contacts', '--json']);
    t.is(json(ids).deleted, 2);
    t.deepEqual([...json(ids).ids].sort(), [101, 102]);
    const leads = (await records(mode, 'contacts', '&status=lead')).total;
    t.true(leads > 0);
    const byFilter = await run(mode, ['data', 'delete', '--filter-json', '{"status":"lead"}', '--table', 'contacts']);
    t.is(byFilter.stdout, `Deleted ${leads} records.\n`);
    t.is((await records(mode, 'contacts', '&status=lead')).total, 0);
    const neither = await run(mode, ['data', 'delete', '--table', 'contacts']);
    t.is(neither.code, 1);
    t.is(neither.stderr, 'Error: Give exactly one of: an ID, --ids a,b or --filter-json JSON.\n');
  }
  t.deepEqual(out.direct.map(volatile), out.remote.map(volatile));
});

test.serial('data export to a file, import back with --dry-run and for real, in both modes', async (t) => {
  const exported: Record<Mode, string> = { remote: '', direct: '' };
  for (const mode of MODES) {
    const file = path.join(tmp, `companies-${mode}.csv`);
    const exp = await run(mode, ['data', 'export', '--table', 'companies', '--sort', 'id', '--output', file]);
    t.is(exp.code, 0, exp.stderr);
    t.regex(exp.stdout, /^Exported 25 records \(\d+\.\d kB\) from companies to .*companies-(remote|direct)\.csv\.\n$/);
    t.regex(exp.stderr, /^Exporting companies to .*\.csv…\n/);
    exported[mode] = fs.readFileSync(file, 'utf8');
    const lines = exported[mode].trim().split(/\r?\n/);
    t.is(lines.length, 26);
    t.true(lines[0]!.split(',').includes('name'));
    t.regex(lines[1]!, /Acme Robotics/);
    t.false(fs.readdirSync(tmp).some((f) => f.includes('.part-')));

    const few = await run(mode, ['data', 'export', '--table', 'companies', '--filter', 'id__lte=3', '--sort', 'id']);
    t.is(few.code, 0, few.stderr);
    t.is(few.stdout.trim().split(/\r?\n/).length, 4);
    t.regex(few.stderr, /Exported 3 records .* to stdout\.\n$/);
    const jsonNoOut = await run(mode, ['data', 'export', '--table', 'companies', '--json']);
    t.is(jsonNoOut.code, 1);

    const dry = await run(mode, ['data', 'import', '--table', 'companies_copy', '--file', file, '--dry-run', '--json']);
    t.is(dry.code, 0, dry.stderr);
    t.like(json(dry), { dry_run: true, total_rows: 25, failed: 0 });
    t.is((await records(mode, 'companies_copy')).total, 0);
    const real = await run(mode, ['data', 'import', '--table', 'companies_copy', '--file', file]);
    t.is(real.code, 0, real.stderr);
    t.is(real.stdout, 'Imported 25 records of 25 rows; 0 failed.\n');
    t.regex(real.stderr, /^Importing companies-(remote|direct)\.csv \(\d+\.\d kB\) into companies_copy…\n/);
    const copy = await records(mode, 'companies_copy', '&_sort=id');
    const original = await records(mode, 'companies', '&_sort=id');
    t.deepEqual(copy.data, original.data);

    // A bad row: reported by row and field, exit code 1; --mapping renames a header.
    const bad = path.join(tmp, `bad-${mode}.csv`);
    fs.writeFileSync(bad, 'id,Company,email\n200,Good Co,good@example.com\n201,Bad Co,not-an-email\n');
    const checked = await run(mode, ['data', 'import', '--table', 'companies_copy', '--file', bad, '--mapping', '{"Company":"name"}', '--dry-run']);
    t.is(checked.code, 1);
    t.regex(checked.stdout, /^Dry run: 2 rows checked, 1 valid, 1 invalid; nothing was stored\.\n {2}row \d+: email: .+\n$/);
    t.is((await records(mode, 'companies_copy', '&id__gte=200')).total, 0);
    const noFile = await run(mode, ['data', 'import', '--table', 'companies_copy', '--file', path.join(tmp, 'missing.csv')]);
    t.is(noFile.code, 1);
    t.regex(noFile.stderr, /\n {2}file: Cannot read .*missing\.csv: No such file\.\n$/);
  }
  t.is(exported.direct, exported.remote);
});

test.serial('data import: every failing row listed, one line per row and field, nothing stored; --delimiter given or sniffed; the same in both modes', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const before = (await records(mode, 'contacts')).total;
    const bad = path.join(tmp, `contacts-bad-${mode}.csv`);
    fs.writeFileSync(bad, [
      'id;company_id;first_name;last_name;email;status',
      '900;1;Good;Row;good900@x.example;active',
      '901;99999;No;Company;c901@x.example;active',
      '902;1;Same;Mail;GOOD900@x.example;lead',
      '1;1;Key;Taken;c903@x.example;active',
      '904;1;Bad;Status;c904@x.example;maybe',
    ].join('\n'));
    const res = await run(mode, ['data', 'import', '--table', 'contacts', '--file', bad, '--delimiter', ';']);
    t.is(res.code, 1);
    t.is(res.stdout, '');
    t.is(
      withoutProgress(res.stderr).replace(/^Importing .*\n/, ''),
      [
        'Error: 4 of 5 rows failed; nothing was imported.',
        '  row 2: company_id: The referenced record does not exist.',
        '  row 3: email: Duplicate: row 1 has the same value (unique index email_lower).',
        '  row 4: id: A record with this value already exists.',
        '  row 5: status: must be equal to one of the allowed values',
        '',
      ].join('\n'),
    );
    out[mode].push(volatile(res.stderr));
    t.is((await records(mode, 'contacts')).total, before, 'nothing stored');
    const asJson = await run(mode, ['data', 'import', '--table', 'contacts', '--file', bad, '--delimiter', ';', '--json']);
    t.is(asJson.code, 1);
    t.like(json(asJson), { status: 'error', code: 'VALIDATION_ERROR', data: { delimiter: ';', encoding: 'utf-8', total_rows: 5, failed: 4, created: 0 } });
    // Sniffed: the same file without --delimiter reads the same; a tab-separated file too.
    const sniffed = await run(mode, ['data', 'import', '--table', 'contacts', '--file', bad]);
    t.is(withoutProgress(sniffed.stderr), withoutProgress(res.stderr));
    const tabs = path.join(tmp, `contacts-tab-${mode}.csv`);
    fs.writeFileSync(tabs, 'id\tcompany_id\tfirst_name\tlast_name\temail\n905\t1\tTab\tSeparated\tc905@x.example\n');
    const dry = await run(mode, ['data', 'import', '--table', 'contacts', '--file', tabs, '--dry-run']);
    t.is(dry.code, 0, dry.stderr);
    t.is(dry.stdout, 'Dry run: 1 row checked, 1 valid, 0 invalid; nothing was stored. Read as utf-8, delimiter tab.\n');
    out[mode].push(dry.stdout);
    const wrong = await run(mode, ['data', 'import', '--table', 'contacts', '--file', tabs, '--delimiter', 'ab']);
    t.is(wrong.code, 1);
    t.regex(withoutProgress(wrong.stderr), /\n {2}delimiter: Expected one character such as ";" or "\|", or "tab"; got "ab"\.\n$/);
  }
  t.deepEqual(out.direct, out.remote);
});

test.serial('data watch: the changes after --since, one JSON line each, then the summary; a bad condition is the API\'s 400; direct mode says the server holds streams', async (t) => {
  const em = s.handle.db.orm.em.fork();
  const [{ physical }] = await em.execute(`SELECT physical_table_name AS physical FROM "${site.schema}".data_tables t JOIN "${site.schema}".apps a ON a.id = t.app_id WHERE a.slug = 'shop-remote' AND t.name = 'companies_copy'`);
  const { last } = await logBounds(em, site.schema, physical);
  const T = '/api/apps/shop-remote/datatables/companies_copy/data/';
  t.is((await api('POST', T, { id: 90001, name: 'Acme', employees: 5 })).status, 201);
  t.is((await api('PATCH', `${T}90001/`, { employees: 6 })).status, 200);
  t.is((await api('POST', T, { id: 90002, name: 'Big', employees: 5000 })).status, 201);
  t.is((await api('DELETE', `${T}90001/`)).status, 204);
  const out = await run('remote', ['data', 'watch', '--table', 'companies_copy', '--since', String(last), '--filter', 'employees__lt=1000', '--count', '3', '--json']);
  t.is(out.code, 0, out.stderr);
  const lines = out.stdout.trim().split('\n').map((l) => JSON.parse(l));
  t.deepEqual(lines.slice(0, 3).map((e) => [e.event, e.key]), [['create', 90001], ['update', 90001], ['delete', 90001]]);
  t.deepEqual(lines[1].changed, ['employees']);
  t.deepEqual(lines[3], { table: 'companies_copy', events: 3, last_event_id: lines[2].id });
  const text = await run('remote', ['data', 'watch', '--table', 'companies_copy', '--since', String(last), '--count', '1']);
  t.regex(text.stdout, /^\d+ create 90001 \{"id":90001,"name":"Acme"/);
  const bad = await run('remote', ['data', 'watch', '--table', 'companies_copy', '--filter', 'nope=1', '--count', '1']);
  t.not(bad.code, 0);
  t.regex(bad.stderr, /nope/);
  const direct = await run('direct', ['data', 'watch', '--table', 'companies_copy', '--count', '1']);
  t.not(direct.code, 0);
  t.regex(direct.stderr, /platform server/);
});
