// `platform app …` and `platform datasource …` in both modes (remote: <api-url>/sites/<schema>/api/…
// with the site's login; direct: the site schema as the system actor): the same output.
import fs from 'node:fs';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, volatile, type Mode, siteWithLogin } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let admin: string;

// created_by differs by design (the site user remotely, null directly): compare without UUIDs and ids.
const normalize = (text: string) => volatile(text).replace(/^(id|app|created_by|modified_by): .*$/gm, '$1: <x>');
const both = bothModesMacro(() => cliEnv(s, configDir));
const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });
const env = () => cliEnv(s, configDir);

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  for (const name of ['Alpha', 'Beta']) if ((await api('POST', '/api/apps/', { name })).status !== 201) throw new Error('seed');
  if ((await api('POST', '/api/apps/alpha/datasources/', { name: 'Store', provider_type: 'jsonb' })).status !== 201) throw new Error('seed ds');
  for (const mode of ['remote', 'direct']) {
    await api('POST', '/api/apps/', { name: `Del ${mode}` });
    await api('POST', '/api/apps/', { name: `Upd ${mode}` });
    await api('POST', '/api/apps/alpha/datasources/', { name: `Gone ${mode}`, provider_type: 'flat_table' });
  }
});
test.after.always(async () => {
  await s?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
});

test.serial('app list: the same table in both modes', both, {
  args: () => ['app', 'list', '--site', site.schema],
  normalize,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^SLUG +NAME +CATEGORY +ACTIVE +SOURCES +TABLES +MODIFIED\nalpha +Alpha +analytics +yes +3 +0 /);
  },
});

test.serial('app settings: shown, and changed with --set; the same output in both modes', async (t) => {
  const settingsNorm = (text: string) => normalize(text).replace(/^updated_at: .*$/gm, 'updated_at: <x>');
  await both.exec(t, {
    args: () => ['app', 'settings', 'beta', '--site', site.schema],
    normalize: settingsNorm,
    check(t, r) {
      t.is(r.code, 0, r.stderr);
      t.regex(r.stdout, /^Settings retrieved\.\n/);
    },
  });
  await both.exec(t, {
    args: () => ['app', 'settings', 'beta', '--site', site.schema, '--set', '{"display_name":"Beta app"}'],
    normalize: settingsNorm,
    async check(t, r) {
      t.is(r.code, 0, r.stderr);
      t.regex(r.stdout, /^Settings updated\.\n(.*\n)*display_name: +Beta app$/m);
      t.is((await api('GET', '/api/apps/beta/settings/')).body.data.display_name, 'Beta app');
    },
  });
  await both.exec(t, {
    args: () => ['app', 'settings', 'beta', '--site', site.schema, '--set', '{"no_such_setting":1}'],
    check(t, r) {
      t.is(r.code, 1);
      t.regex(r.stderr, /no_such_setting/);
    },
  });
});

test.serial('app create, get, update, stats, delete, restore in both modes', async (t) => {
  const run = (mode: Mode, args: string[]) => runCli(mode === 'direct' ? [...args, '--site', site.schema, '--direct'] : [...args, '--site', site.schema], env());
  const out: Record<string, string[]> = { remote: [], direct: [] };
  for (const mode of ['remote', 'direct'] as Mode[]) {
    const created = await run(mode, ['app', 'create', `Made ${mode}`, '--description', 'd', '--settings', '{"category":"storage"}', '--json']);
    t.is(created.code, 0, created.stderr);
    t.like(json(created), { status: 'success', message: 'App created.', data: { slug: `made-${mode}`, settings: { category: 'storage' } } });
    const got = await run(mode, ['app', 'get', 'alpha', '--json']);
    t.true(json(got).data.datasources.some((d: { slug: string }) => d.slug === 'store'));
    t.is(json(got).data.settings.icon_url, null);
    const upd = await run(mode, ['app', 'update', `upd-${mode}`, '--name', 'Renamed']);
    t.is(upd.code, 0, upd.stderr);
    out[mode].push(upd.stdout.replace(mode, '<mode>'));
    const stats = await run(mode, ['app', 'stats', 'alpha']);
    out[mode].push(stats.stdout);
    const del = await run(mode, ['app', 'delete', `del-${mode}`]);
    t.is(del.stdout, `App "del-${mode}" deleted.\n`);
    t.is((await api('GET', `/api/apps/del-${mode}/`)).status, 404);
    const inactive = await run(mode, ['app', 'list', '--inactive', '--json']);
    t.true(json(inactive).data.some((a: { slug: string }) => a.slug === `del-${mode}`));
    const restored = await run(mode, ['app', 'restore', `del-${mode}`]);
    t.is(restored.stdout, `App "del-${mode}" restored.\n`);
    t.is((await api('GET', `/api/apps/del-${mode}/`)).status, 200);
    const missing = await run(mode, ['app', 'get', 'nope']);
    t.is(missing.code, 1);
    t.is(missing.stderr, 'Error: App "nope" not found.\n');
    const bad = await run(mode, ['app', 'create', 'Bad', '--settings', '{"primary_color":"red"}']);
    t.is(bad.code, 1);
    t.regex(bad.stderr, /settings\.primary_color/);
  }
  t.deepEqual(out.direct.map(normalize), out.remote.map(normalize));
  t.regex(out.remote[1], /^app_name: +Alpha\napp_slug: +alpha\ntotal_datasources: +\d/);
});

test.serial('datasource list: the same table in both modes', both, {
  args: () => ['datasource', 'list', '--site', site.schema, '--app', 'alpha'],
  normalize,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^ID +SLUG +NAME +PROVIDER +TABLES +MATERIALIZED +DESCRIPTION\n/);
  },
});

test.serial('datasource stats: the counts as key-value lines, the same in both modes; --json is the API body', both, {
  args: () => ['datasource', 'stats', 'store', '--site', site.schema, '--app', 'alpha'],
  async check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, 'total_tables:          0\nmaterialized_tables:   0\nunmaterialized_tables: 0\nprovider_type:         jsonb\nis_active:             yes\n');
    const asJson = await runCli(['datasource', 'stats', 'store', '--site', site.schema, '--app', 'alpha', '--json'], env());
    t.deepEqual(json(asJson), (await api('GET', '/api/apps/alpha/datasources/store/stats/')).body);
    t.is((await runCli(['datasource', 'stats', 'no-such', '--site', site.schema, '--app', 'alpha'], env())).stderr, 'Error: Data source "no-such" not found.\n');
  },
});

test.serial('datasource create, get, update, delete in both modes', async (t) => {
  const run = (mode: Mode, args: string[]) => runCli([...args, '--site', site.schema, '--app', 'alpha', ...(mode === 'direct' ? ['--direct'] : [])], env());
  const shown: Record<string, string> = {};
  for (const mode of ['remote', 'direct'] as Mode[]) {
    const created = await run(mode, ['datasource', 'create', `Src ${mode}`, '--provider', 'docstore', '--config', '{"a":1}', '--json']);
    t.is(created.code, 0, created.stderr);
    t.like(json(created).data, { slug: `src-${mode}`, provider_type: 'docstore', provider_config: { a: 1 }, app_slug: 'alpha' });
    const got = await run(mode, ['datasource', 'get', String(json(created).data.id)]);
    t.regex(got.stdout, new RegExp(`slug: +src-${mode}`));
    const upd = await run(mode, ['datasource', 'update', `src-${mode}`, '--description', 'changed']);
    t.is(upd.code, 0, upd.stderr);
    shown[mode] = normalize(upd.stdout).replace(new RegExp(mode, 'g'), '<m>');
    const dup = await run(mode, ['datasource', 'create', 'Dup', '--slug', 'store', '--provider', 'jsonb']);
    t.is(dup.code, 1);
    t.regex(dup.stderr, /slug: A data source with this slug already exists/);
    const del = await run(mode, ['datasource', 'delete', `gone-${mode}`]);
    t.is(del.stdout, `Data source "gone-${mode}" deleted.\n`);
    t.is((await api('GET', `/api/apps/alpha/datasources/gone-${mode}/`)).status, 404);
  }
  t.is(shown.direct, shown.remote);
});

test.serial('app export: the package written whole in both modes, its checksum the job\'s; --no-<module> leaves a folder out', async (t) => {
  const AdmZip = (await import('adm-zip')).default;
  for (const mode of ['remote', 'direct'] as Mode[]) {
    const out = `${configDir}/alpha-${mode}.zip`;
    const r = await runCli(['app', 'export', 'alpha', '-o', out, '--no-storage', '--site', site.schema, '--json', ...(mode === 'direct' ? ['--direct'] : [])], env());
    t.is(r.code, 0, r.stderr);
    const body = json(r);
    const bytes = fs.readFileSync(out);
    t.like(body, { app: 'alpha', output: out, size: bytes.length });
    t.is(body.checksum, `sha256:${(await import('node:crypto')).createHash('sha256').update(bytes).digest('hex')}`);
    const zip = new AdmZip(bytes);
    t.like(JSON.parse(zip.readAsText('manifest.json')), { format: 'app-package', package: { app_slug: 'alpha' }, export_options: { include_storage: false } });
    t.false(zip.getEntries().some((e) => e.entryName.startsWith('storage/')));
    t.true(zip.getEntries().some((e) => e.entryName === 'datatables/metadata.json'));
    t.deepEqual(fs.readdirSync(configDir).filter((f) => f.includes('.part-')), [], 'no partial file left');
  }
  const missing = await runCli(['app', 'export', 'nope', '-o', `${configDir}/nope.zip`, '--site', site.schema], env());
  t.not(missing.code, 0);
  t.false(fs.existsSync(`${configDir}/nope.zip`));
});

test.serial('app import: a plan (--dry-run) and an import in both modes; --detailed-exitcode says whether there are changes; a missing file is exit 1', async (t) => {
  const out = `${configDir}/alpha-import.zip`;
  t.is((await runCli(['app', 'export', 'alpha', '-o', out, '--site', site.schema], env())).code, 0);
  for (const mode of ['remote', 'direct'] as Mode[]) {
    const direct = mode === 'direct' ? ['--direct'] : [];
    t.is((await api('PATCH', '/api/apps/alpha/', { description: `changed ${mode}` })).status, 200);
    const plan = await runCli(['app', 'import', out, '--dry-run', '--detailed-exitcode', '--site', site.schema, ...direct], env());
    t.is(plan.code, 2, plan.stderr);
    t.regex(plan.stdout, /^app update: alpha$/m);
    t.regex(plan.stdout, /^Dry run alpha: 1 change \(job [0-9a-f-]{36}\)\.$/m);
    t.regex(plan.stderr, /Planning the import of .*alpha-import\.zip/);
    t.is((await api('GET', '/api/apps/alpha/')).body.data.description, `changed ${mode}`, 'a dry run changes nothing');

    const done = await runCli(['app', 'import', out, '--site', site.schema, '--json', ...direct], env());
    t.is(done.code, 0, done.stderr);
    t.like(json(done), { job: { status: 'completed', dry_run: false, app_slug: 'alpha' }, report: { summary: '1 change', modules: { app: { updated: 1 } } } });
    t.is((await api('GET', '/api/apps/alpha/')).body.data.description, '', 'the package\'s description is back');

    const again = await runCli(['app', 'import', out, '--dry-run', '--detailed-exitcode', '--site', site.schema, ...direct], env());
    t.is(again.code, 0, again.stderr);
    t.regex(again.stdout, /Dry run alpha: 0 changes/);
  }
  const missing = await runCli(['app', 'import', `${configDir}/none.zip`, '--site', site.schema], env());
  t.is(missing.code, 1);
  t.regex(missing.stderr, /No package at .*none\.zip/);
});
