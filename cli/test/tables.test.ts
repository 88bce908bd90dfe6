// `platform table …` and `platform demo` in both modes (remote: <api-url>/sites/<schema>/api/…
// with the site's login; direct: the site schema as the system actor): the same output.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { cliEnv, json, MODES, runCli, volatile, type Mode, siteWithLogin } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let tmp: string;
let admin: string;
const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures');
const schemaFile = (name: string) => path.join(FIXTURES, 'schemas', name);

// What differs by design between two apps made the same way: ids, times, the app id in physical names.
const normalize = (text: string) =>
  volatile(text)
    .replace(/^(id|data_source|created_by|modified_by):( +).*$/gm, '$1:$2<x>')
    .replace(/\ba\d+_/g, 'a<n>_')
    .replace(/ +$/gm, '');
const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });
const env = () => cliEnv(s, configDir);
/** `platform …args --site <schema> [--direct]` */
const run = (mode: Mode, args: string[]) => runCli([...args, '--site', site.schema, ...(mode === 'direct' ? ['--direct'] : [])], env());

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-tables-test-'));
  for (const mode of MODES) {
    if ((await api('POST', '/api/apps/', { name: `Tab ${mode}` })).status !== 201) throw new Error('seed app');
    if ((await api('POST', `/api/apps/tab-${mode}/datasources/`, { name: 'Main', slug: 'main', provider_type: 'flat_table' })).status !== 201) throw new Error('seed ds');
  }
});
test.after.always(async () => {
  await s?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
  fs.rmSync(tmp, { recursive: true, force: true });
});

test.serial('table create, get, schema, update, materialize, validate, list, stats, delete in both modes', async (t) => {
  const valid = path.join(tmp, 'valid.json');
  fs.writeFileSync(valid, JSON.stringify([{ id: 1, name: 'Acme' }, { id: 2, name: 'Beta', email: 'x@beta.example' }]));
  const invalid = path.join(tmp, 'invalid.json');
  fs.writeFileSync(invalid, JSON.stringify([{ id: 1, name: 'Acme', email: 'not-an-email' }]));
  const shown: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const app = ['--app', `tab-${mode}`];
    const out = shown[mode];
    const created = await run(mode, ['table', 'create', '--datasource', 'main', '--schema', schemaFile('companies.json'), ...app, '--json']);
    t.is(created.code, 0, created.stderr);
    t.like(json(created), { status: 'success', message: 'Data table created.', data: { name: 'companies', datasource_slug: 'main', is_materialized: false, primary_key: ['id'] } });
    const contacts = await run(mode, ['table', 'create', '--datasource', 'main', '--name', 'contacts', '--schema', schemaFile('contacts.json'), '--description', 'People', ...app]);
    t.is(contacts.code, 0, contacts.stderr);
    t.regex(contacts.stdout, /^Data table created\.\nid: +\d+\n/);
    t.regex(contacts.stdout, /^description: +People$/m);
    out.push(contacts.stdout);

    const got = await run(mode, ['table', 'get', 'companies', ...app]);
    t.regex(got.stdout, /^field_names: +id, name, domain, website, email, industry, employees, founded, revenue, is_public, country, updated$/m);
    out.push(got.stdout);
    const schema = await run(mode, ['table', 'schema', 'companies', ...app]);
    t.deepEqual(JSON.parse(schema.stdout), JSON.parse(fs.readFileSync(schemaFile('companies.json'), 'utf8')));
    const schemaJson = await run(mode, ['table', 'schema', 'companies', ...app, '--json']);
    t.regex(json(schemaJson).schema_hash, /^[0-9a-f]{64}$/);
    t.is(json(schemaJson).field_count, 12);

    const upd = await run(mode, ['table', 'update', 'contacts', '--description', 'Changed', ...app]);
    t.is(upd.code, 0, upd.stderr);
    t.regex(upd.stdout, /^description: +Changed$/m);
    out.push(upd.stdout);

    const early = await run(mode, ['table', 'materialize', 'contacts', ...app]);
    t.is(early.code, 1);
    t.is(early.stdout, '');
    t.regex(early.stderr, /^Error: Foreign key target not materialized\.\n {2}json_schema: foreignKeys\[0\] \(company_id → companies\): .*materialize it first\.\n$/);
    for (const name of ['companies', 'contacts']) {
      const m = await run(mode, ['table', 'materialize', name, ...app]);
      t.is(m.code, 0, m.stderr);
      t.regex(m.stdout, new RegExp(`^Data table materialized\\. \\(${name} → a\\d+_${name}\\)\\n$`));
      out.push(m.stdout);
    }
    const again = await run(mode, ['table', 'materialize', 'companies', ...app]);
    t.is(again.code, 1);
    t.is(again.stderr, 'Error: Data table "companies" is already materialized.\n');
    const locked = await run(mode, ['table', 'update', 'companies', '--schema', schemaFile('contacts.json'), ...app]);
    t.is(locked.code, 1);
    t.regex(locked.stderr, /^Error: The schema change has unsafe operations; they run only when the data source "main" allows data loss/);

    const ok = await run(mode, ['table', 'validate', 'companies', '--file', valid, ...app]);
    t.is(ok.code, 0, ok.stderr);
    t.is(ok.stdout, 'Valid: 2 records.\n');
    const bad = await run(mode, ['table', 'validate', 'companies', '--file', invalid, ...app, '--json']);
    t.is(bad.code, 1);
    t.like(json(bad), { is_valid: false, validated_rows: 1 });
    t.regex(json(bad).errors[0], /email/);
    const badText = await run(mode, ['table', 'validate', 'companies', '--file', invalid, ...app]);
    t.regex(badText.stdout, /^Invalid: 1 problem in 1 record\.\n {2}row 0: field 'email'/);
    const noFile = await run(mode, ['table', 'validate', 'companies', '--file', path.join(tmp, 'nope.json'), ...app]);
    t.is(noFile.code, 1);
    t.regex(noFile.stderr, /^Error: Invalid input\.\n {2}file: Cannot read .*nope\.json: No such file\.\n$/);

    const list = await run(mode, ['table', 'list', '--datasource', 'main', ...app]);
    t.is(list.code, 0, list.stderr);
    t.regex(list.stdout, /^NAME +DATA SOURCE +FIELDS +MATERIALIZED +PHYSICAL TABLE +MODIFIED\ncompanies +main +12 +yes +a\d+_companies .*\ncontacts +main +11 +yes +a\d+_contacts .*\n\n2 tables\n$/);
    out.push(list.stdout);
    const listJson = await run(mode, ['table', 'list', ...app, '--page-size', '1', '--json']);
    t.is(json(listJson).count, 2);
    t.is(json(listJson).results.length, 1);
    t.true(json(listJson).next.endsWith(`/sites/${site.schema}/api/apps/tab-${mode}/datatables/?page_size=1&page=2`), json(listJson).next);
    const stats = await run(mode, ['table', 'stats', ...app]);
    t.regex(stats.stdout, /^total_tables: +2\nmaterialized_tables: +2\nunmaterialized_tables: +0\ndatasource_count: +1\n\nSLUG +NAME +PROVIDER +TABLES +MATERIALIZED\nmain +Main +flat_table +2 +2\n$/);
    out.push(stats.stdout);

    const missing = await run(mode, ['table', 'get', 'nope', ...app]);
    t.is(missing.code, 1);
    t.is(missing.stderr, 'Error: Data table "nope" not found.\n');
    const badName = await run(mode, ['table', 'get', 'Bad-Name', ...app]);
    t.is(badName.code, 1);
    t.regex(badName.stderr, /^Error: Invalid input\.\n {2}name: /);
    const refused = await run(mode, ['table', 'delete', 'companies', ...app]);
    t.is(refused.code, 1);
    t.is(refused.stderr, 'Error: Data table "companies" is referenced by a foreign key of: contacts.\n');
    const del = await run(mode, ['table', 'delete', 'contacts', ...app]);
    t.is(del.stdout, 'Data table deleted.\n');
    t.is((await api('GET', `/api/apps/tab-${mode}/datatables/contacts/`)).status, 404);
  }
  t.deepEqual(shown.direct.map(normalize), shown.remote.map(normalize));
});

test.serial('a table schema refused with several field errors: one line each on stderr (create, update, migrate); --json the error body as it is', async (t) => {
  const bad = path.join(tmp, 'bad-schema.json');
  fs.writeFileSync(bad, JSON.stringify({ fields: [{ name: 'id', type: 'integer' }, { name: 'age', type: 'integr' }, { name: 'Bad Name', type: 'string' }], primaryKey: ['id'] }));
  // The messages are the schema validator's; what is asserted here is one line each, the field first.
  const shape = /^Error: Invalid table schema\.\n {2}json_schema: Field 'age': invalid type "integr"; [^\n]+\n {2}json_schema: Field 'Bad Name': [^\n]+\n$/;
  const shown: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const app = ['--app', `tab-${mode}`];
    t.is((await run(mode, ['table', 'create', '--datasource', 'main', '--name', 'good', '--schema', schemaFile('companies.json'), ...app])).code, 0);
    for (const args of [['table', 'create', '--datasource', 'main', '--name', 'bad'], ['table', 'update', 'good'], ['table', 'migrate', 'good']]) {
      const r = await run(mode, [...args, '--schema', bad, ...app]);
      t.is(r.code, 1, args.join(' '));
      t.is(r.stdout, '');
      t.regex(r.stderr, shape, args.join(' '));
      shown[mode].push(r.stderr);
    }
    const asJson = await run(mode, ['table', 'create', '--datasource', 'main', '--name', 'bad', '--schema', bad, ...app, '--json']);
    t.is(asJson.code, 1);
    const body = json(asJson);
    t.like(body, { status: 'error', code: 'VALIDATION_ERROR', message: 'Invalid table schema.' });
    t.deepEqual(body.errors, { json_schema: shown[mode][0]!.split('\n').slice(1, 3).map((l) => l.replace('  json_schema: ', '')) });
    t.is((await api('GET', `/api/apps/tab-${mode}/datatables/bad/`)).status, 404, 'nothing created');
  }
  t.deepEqual(shown.direct, shown.remote);
});

test.serial('table migrate (plan, progress, --preview), history, rollback and datasource update --allow-data-loss in both modes', async (t) => {
  const v1 = { fields: [{ name: 'id', type: 'integer' }, { name: 'n', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: ['id'] };
  const v2 = { ...v1, fields: [v1.fields[0], { name: 'amount', type: 'integer', 'x-rename-from': 'n' }, v1.fields[2], { name: 'extra', type: 'string' }] };
  const v3 = { ...v1, fields: [v1.fields[0], { name: 'amount', type: 'integer', constraints: { required: true } }, v1.fields[2], { name: 'extra', type: 'string' }] };
  const files = Object.fromEntries(Object.entries({ v1, v2, v3 }).map(([k, doc]) => {
    const file = path.join(tmp, `mig-${k}.json`);
    fs.writeFileSync(file, JSON.stringify(doc));
    return [k, file];
  }));
  const shown: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const app = ['--app', `tab-${mode}`];
    t.is((await run(mode, ['table', 'create', '--datasource', 'main', '--name', 'mig', '--schema', files.v1!, ...app])).code, 0);
    t.is((await run(mode, ['table', 'materialize', 'mig', ...app])).code, 0);
    t.is((await api('POST', `/api/apps/tab-${mode}/datatables/mig/data/`, [{ id: 1, n: 5, label: 'a' }, { id: 2, n: null, label: 'b' }])).status, 201);

    const preview = await run(mode, ['table', 'migrate', 'mig', '--schema', files.v2!, '--preview', ...app]);
    t.is(preview.code, 0, preview.stderr);
    t.regex(preview.stdout, /^4 operations, all safe, estimated \d+ ms:\n {2}drop_search_index\n.*\n {2}rename_column amount\n {4}ALTER TABLE "[^"]+"\."a\d+_mig" RENAME COLUMN "n" TO "amount"\n {2}add_column extra\n/);
    t.regex(preview.stdout, /\nwarning: The keyword search index covers/);
    shown[mode].push(normalize(preview.stdout));
    const migrated = await run(mode, ['table', 'migrate', 'mig', '--schema', files.v2!, ...app]);
    t.is(migrated.code, 0, migrated.stderr);
    t.regex(migrated.stderr, /^4 operations, estimated \d+ ms:\n {4}drop_search_index\n {4}rename_column amount\n {4}add_column extra\n {4}create_search_index\nMigrating mig…\n$/);
    t.regex(migrated.stdout, /^Migrated mig: schema_hash [0-9a-f]{64}\./);
    t.deepEqual((await api('GET', `/api/apps/tab-${mode}/datatables/mig/data/1/`)).body.data, { id: 1, amount: 5, label: 'a', extra: null });

    // Unsafe (amount becomes required): refused until the data source allows data loss; then PostgreSQL refuses the NULL row.
    const unsafe = await run(mode, ['table', 'migrate', 'mig', '--schema', files.v3!, ...app]);
    t.is(unsafe.code, 1);
    t.regex(unsafe.stderr, /Error: The schema change has unsafe operations; .*--allow-data-loss\)\.\n {2}json_schema: Unsafe operation set_not_null \(amount\): /);
    const allow = await run(mode, ['datasource', 'update', 'main', '--allow-data-loss', ...app, '--json']);
    t.is(allow.code, 0, allow.stderr);
    t.deepEqual(json(allow).provider_config, { allow_data_loss: true });
    const failed = await run(mode, ['table', 'migrate', 'mig', '--schema', files.v3!, ...app]);
    t.is(failed.code, 1);
    t.regex(failed.stderr, /Error: The migration failed and changed nothing: column "amount" of relation "a\d+_mig" contains null values/);
    t.is((await run(mode, ['datasource', 'update', 'main', '--no-allow-data-loss', ...app])).code, 0);
    t.deepEqual((await api('GET', `/api/apps/tab-${mode}/datasources/main/`)).body.provider_config, { allow_data_loss: false });

    const history = await run(mode, ['table', 'history', 'mig', ...app]);
    t.is(history.code, 0, history.stderr);
    t.regex(history.stdout, /^REVISION +TYPE +STATUS +OPERATIONS +STARTED +MS +ERROR\n[0-9a-f]{12} +ALTER_TABLE +FAILED +set_not_null amount .*contains null values\n[0-9a-f]{12} +ALTER_TABLE +SUCCESS +drop_search_index, rename_column amount, add_column extra, create_search_index .*\n[0-9a-f]{12} +CREATE_TABLE +SUCCESS .*\n\n3 operations\n$/);
    shown[mode].push(normalize(history.stdout).replace(/[0-9a-f]{12}/g, '<rev>').replace(/\d{4}-\d\d-\d\d \d\d:\d\d/g, '<when>').replace(/ +\d+ +/g, ' <ms> ').replace(/ +(?=ERROR\n)/, ' ')); // the MS column's width follows its widest value
    const ops = json(await run(mode, ['table', 'history', 'mig', '--status', 'success', ...app, '--json']));
    t.is(ops.count, 2);
    const revision = ops.results[0].revision_id;
    const rolled = await run(mode, ['table', 'rollback', 'mig', '--revision', revision, ...app]);
    t.is(rolled.code, 0, rolled.stderr);
    t.is(rolled.stderr, `Rolling back ${revision} of mig…\n`);
    t.regex(rolled.stdout, new RegExp(`^Revision ${revision} of data table "mig" is rolled back\\. \\(4 operations reversed; recorded as [0-9a-f]{12}\\)\\n`));
    t.deepEqual((await api('GET', `/api/apps/tab-${mode}/datatables/mig/data/1/`)).body.data, { id: 1, n: 5, label: 'a' });
    const twice = await run(mode, ['table', 'rollback', 'mig', '--revision', revision, ...app]);
    t.is(twice.code, 1);
    t.regex(twice.stderr, /rolled back already/);
  }
  t.deepEqual(shown.direct, shown.remote);
});

const ROOT = path.resolve(import.meta.dirname, '../..');
const hasScript = spawnSync('script', ['--version']).status === 0;

/**
 * `platform …args` on a terminal (util-linux `script` gives it a pseudo-terminal): `answer` is
 * typed once a `[y/N]` question shows. The terminal merges stdout and stderr (and echoes the answer).
 */
function runOnTerminal(args: string[], answer: string): Promise<{ code: number; output: string }> {
  const quote = (x: string) => `'${x.replaceAll("'", "'\\''")}'`;
  const child = spawn('script', ['-qec', [process.execPath, 'bin/run.js', ...args].map(quote).join(' '), '/dev/null'], { cwd: ROOT, env: env(), stdio: ['pipe', 'pipe', 'ignore'] });
  let output = '';
  let asked = false;
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    output += d;
    if (!asked && output.includes('[y/N]')) {
      asked = true;
      child.stdin.write(`${answer}\r`);
    }
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      // Without readline's cursor moves (ESC [ n G, ESC [ J) and the terminal's carriage returns.
      const text = output.split('\u001b').map((part, i) => (i ? part.replace(/^\[\d*[A-Z]/, '') : part)).join('');
      resolve({ code: code ?? 1, output: text.replace(/\r+\n/g, '\n') });
    });
  });
}

test.serial('table rollback that loses data: --dry-run and --preview say so; no terminal: refused unless --yes, nothing changed; a terminal asks (both modes)', async (t) => {
  const v1 = { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: ['id'] };
  const v2 = { ...v1, fields: [...v1.fields, { name: 'score', type: 'integer' }] };
  const file = path.join(tmp, 'loss-v2.json');
  fs.writeFileSync(file, JSON.stringify(v2));
  const shown: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const app = ['--app', `tab-${mode}`];
    const base = `/api/apps/tab-${mode}/datatables/loss/`;
    t.is((await api('POST', `/api/apps/tab-${mode}/datasources/main/datatables/`, { name: 'loss', json_schema: v1 })).status, 201);
    t.is((await api('POST', `${base}materialize/`)).status, 200);
    const preview = await run(mode, ['table', 'migrate', 'loss', '--schema', file, '--preview', ...app]);
    t.regex(preview.stdout, /\nwarning: A rollback drops column 'score' with the values written to it\.\n/);
    t.is((await run(mode, ['table', 'migrate', 'loss', '--schema', file, ...app])).code, 0);
    t.is((await api('POST', `${base}data/`, [{ id: 1, label: 'a', score: 7 }, { id: 2, label: 'b', score: null }])).status, 201);
    const revision = (await api('GET', `${base}operation-history/`)).body.results[0].revision_id;
    const rollback = ['table', 'rollback', 'loss', '--revision', revision, ...app];
    const unchanged = async (why: string) => {
      t.deepEqual((await api('GET', `${base}data/1/`)).body.data, { id: 1, label: 'a', score: 7 }, why);
      t.is((await api('GET', `${base}operation-history/`)).body.results[0].status, 'SUCCESS', why);
    };
    const loss = "Column 'score' is dropped with its values (1 row holds one).";

    const dry = await run(mode, [...rollback, '--dry-run']);
    t.is(dry.code, 0, dry.stderr);
    t.is(dry.stdout, `Revision ${revision} of data table "loss" can be rolled back (dry run: nothing was changed).\ndata loss: ${loss}\nwarning: A rollback drops column 'score' with the values written to it.\n`);
    t.is(dry.stderr, '');
    await unchanged('dry run');

    const refused = await run(mode, rollback);
    t.is(refused.code, 1);
    t.is(refused.stdout, '');
    t.is(refused.stderr, `Error: Rolling back ${revision} of loss loses data: ${loss} Nothing was changed; pass --yes to roll back anyway.\n`);
    await unchanged('no terminal, no --yes');
    const refusedJson = await run(mode, [...rollback, '--json']);
    t.is(refusedJson.code, 1);
    t.deepEqual(json(refusedJson), {
      status: 'error', code: 'BAD_REQUEST', message: `Rolling back ${revision} of loss loses data: ${loss} Nothing was changed; pass --yes to roll back anyway.`,
      data_loss: [loss], warnings: ["A rollback drops column 'score' with the values written to it."],
    });
    await unchanged('--json without --yes');

    if (hasScript) {
      const declined = await runOnTerminal([...rollback, '--site', site.schema, ...(mode === 'direct' ? ['--direct'] : [])], 'n');
      t.is(declined.code, 1, declined.output);
      t.is(declined.output, `data loss: ${loss}\nRoll back ${revision} of loss and lose this data? [y/N] n\nError: Cancelled: nothing was changed.\n`);
      await unchanged('declined on the terminal');
    } else t.log('no `script` command: the terminal prompt is not tested');

    const yes = await run(mode, [...rollback, '--yes', '--json']);
    t.is(yes.code, 0, yes.stderr);
    t.like(json(yes), { success: true, new_status: 'ROLLED_BACK', data_loss: [loss] });
    t.deepEqual((await api('GET', `${base}data/1/`)).body.data, { id: 1, label: 'a' });
    t.is(yes.stderr, `Rolling back ${revision} of loss…\n`);
    shown[mode].push(dry.stdout.replace(revision, '<rev>'), refused.stderr.replaceAll(revision, '<rev>'));

    // On a terminal, "y" rolls back (a second migration to roll back).
    if (hasScript) {
      t.is((await run(mode, ['table', 'migrate', 'loss', '--schema', file, ...app])).code, 0);
      t.is((await api('PATCH', `${base}data/2/`, { score: 3 })).status, 200);
      const again = (await api('GET', `${base}operation-history/`)).body.results[0].revision_id;
      const agreed = await runOnTerminal(['table', 'rollback', 'loss', '--revision', again, ...app, '--site', site.schema, ...(mode === 'direct' ? ['--direct'] : [])], 'y');
      t.is(agreed.code, 0, agreed.output);
      t.regex(agreed.output, new RegExp(`^data loss: Column 'score' is dropped with its values \\(1 row holds one\\)\\.\\nRoll back ${again} of loss and lose this data\\? \\[y/N\\] y\\nRolling back ${again} of loss…\\nRevision ${again} of data table "loss" is rolled back\\.`));
      t.deepEqual((await api('GET', `${base}data/2/`)).body.data, { id: 2, label: 'b' });
    }
  }
  t.deepEqual(shown.direct, shown.remote);
});

test.serial('demo: loads the fixtures, and a second run says what exists', async (t) => {
  const first = await run('remote', ['demo', '--json']);
  t.is(first.code, 0, first.stderr);
  const r = json(first);
  const status = (steps: { kind: string; name: string; status: string }[]) => Object.fromEntries(steps.map((x) => [`${x.kind} ${x.name}`, x.status]));
  // Every fixture schema becomes a table (`x.<provider>.json` on that provider's source), materialized.
  const files = fs.readdirSync(path.join(FIXTURES, 'schemas')).filter((f) => f.endsWith('.json'));
  const names = files.map((f) => f.split('.')[0]!).sort();
  t.true(['companies', 'contacts', 'orders', 'events', 'notes'].every((n) => names.includes(n)));
  t.deepEqual(status(r.steps), {
    'app crm': 'created',
    'datasource main': 'created', 'datasource events': 'created', 'datasource docs': 'created',
    ...Object.fromEntries(names.flatMap((n) => [[`table ${n}`, 'created'], [`materialize ${n}`, 'materialized']])),
    'import companies': 'imported', 'import contacts': 'imported',
  });
  // Dependency order: a table after the tables its foreign keys name.
  const materialized = r.steps.filter((x: { kind: string }) => x.kind === 'materialize').map((x: { name: string }) => x.name);
  t.true(materialized.indexOf('companies') < materialized.indexOf('contacts'));
  t.true(materialized.indexOf('contacts') < materialized.indexOf('orders'));
  t.like(r.imports, { companies: { created: 25, failed: 0 }, contacts: { created: 40, failed: 0 } });
  t.regex(first.stderr, /^\[1\/4\] App crm and its data sources…\n\[2\/4\] Tables \(companies, /);
  t.regex(first.stderr, /\[4\/4\] Records \(companies\.csv, contacts\.csv\)…\n/);
  const tables = (await api('GET', '/api/apps/crm/datatables/')).body;
  const where = Object.fromEntries(tables.results.map((x: { name: string; datasource_slug: string; is_materialized: boolean }) => [x.name, `${x.datasource_slug}:${x.is_materialized}`]));
  t.is(tables.count, names.length);
  t.like(where, { companies: 'main:true', contacts: 'main:true', orders: 'main:true', events: 'events:true', notes: 'docs:true' });
  t.is((await api('GET', '/api/apps/crm/datatables/contacts/data/?page_size=1')).body.total, 40);

  const second = await run('direct', ['demo']);
  t.is(second.code, 0, second.stderr);
  t.regex(second.stdout, /^app crm: exists\ndatasource main: exists\n/);
  t.regex(second.stdout, /^table orders: exists \(main\)$/m);
  t.regex(second.stdout, /^materialize orders: exists$/m);
  t.regex(second.stdout, /^import companies: skipped \(already holds 25 records\)\nimport contacts: skipped \(already holds 40 records\)\n$/m);
  t.notRegex(second.stdout, /created|imported/);
  t.regex(second.stderr, /Done\.\n$/);
});
