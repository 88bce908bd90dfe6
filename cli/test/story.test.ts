// The operator's first day, end to end in the CLI (issue 30): log in, an organization, a site,
// an app, two tables joined by a foreign key, CSV imports, a site user with an attribute, a
// policy on that attribute under which she sees only her rows, a bucket, a function, a schema
// migration and its rollback. Run once remotely (after `platform login --api-url`) and once with
// --direct; every step's output must be the same, byte for byte (names of the run aside).
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { ADMIN, startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { cliEnv, MODES, runCli, tempConfigDir, volatile, type CliResult, type Mode } from './helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const fixture = (p: string) => path.join(ROOT, 'fixtures', p);
const EVE_PASSWORD = 'Eve-pass-word-42';
let s: TestServer;
const dirs: string[] = [];

test.before(async () => {
  s = await startTestServer();
});
test.after.always(async () => {
  await s?.close();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

interface Step {
  label: string;
  result: CliResult;
}

test('the operator\'s day: remote and direct answer alike, step by step', async (t) => {
  const steps: Record<Mode, Step[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const dir = tempConfigDir();
    dirs.push(dir);
    const env = cliEnv(s, dir, { PLATFORM_API_URL: undefined }); // remote: only what `login --api-url` remembered
    const site = `shop_${mode}`;
    const direct = mode === 'direct' ? ['--direct', '--as', ADMIN.username] : []; // the same principal as the remote login
    const files = path.join(dir, 'files');
    fs.mkdirSync(files);
    const write = (name: string, content: unknown) => {
      const file = path.join(files, name);
      fs.writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
      return file;
    };
    const step = async (label: string, args: string[], as?: 'eve') => {
      const who = as === undefined ? direct : mode === 'direct' ? ['--direct', '--as', 'eve'] : ['--profile', 'eve'];
      const result = await runCli([...args, ...who], env, 60_000);
      t.is(result.code, 0, `${mode} ${label}: ${result.stderr}${result.stdout}`);
      steps[mode].push({ label, result });
      return result;
    };
    const app = ['--site', site, '--app', 'crm'];

    if (mode === 'remote') {
      const login = await runCli(['login', '--api-url', s.url, '--username', ADMIN.username, '--password', ADMIN.password], env);
      t.is(login.code, 0, login.stderr);
    }
    await step('whoami', ['whoami']);
    await step('org create', ['org', 'create', '--name', `Story ${mode}`]);
    await step('site create', ['site', 'create', '--org', `story-${mode}`, '--name', `Shop ${mode}`, '--schema-name', site]);
    await step('app create', ['app', 'create', 'CRM', '--site', site]);
    await step('datasource create', ['datasource', 'create', 'Main', '--slug', 'main', '--provider', 'flat_table', ...app]);
    for (const table of ['companies', 'contacts']) {
      await step(`table create ${table}`, ['table', 'create', '--datasource', 'main', '--schema', fixture(`schemas/${table}.json`), ...app]);
      await step(`table materialize ${table}`, ['table', 'materialize', table, ...app]);
      await step(`data import ${table}`, ['data', 'import', '--table', table, '--file', fixture(`csv/${table}.csv`), ...app]);
    }
    await step('contacts through their company', ['data', 'list', '--table', 'contacts', '--filter', 'company_id.country=FR', '--sort', 'id', '--page-size', '3', ...app]);

    // A site user with an attribute, and a policy on it: she reads the companies of her country only.
    await step('site user create', ['user', 'create', '--site', site, '--username', 'eve', '--email', 'eve@example.com', '--password', EVE_PASSWORD]);
    await step('site user attributes', ['user', 'update', 'eve', '--site', site, '--attributes', '{"country":"FR"}']);
    const policy = write('companies-policy.json', {
      resourcePolicy: {
        resource: 'datatable:companies',
        version: 'default',
        rules: [
          { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
          { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['user'], condition: { match: { expr: 'R.attr.country == P.attr.country' } } },
        ],
      },
    });
    await step('policy put', ['policy', 'put', '--file', policy, ...app]);
    if (mode === 'remote') {
      const eve = await runCli(['login', '--api-url', s.url, '--profile', 'eve', '--site', site, '--username', 'eve', '--password', EVE_PASSWORD], env);
      t.is(eve.code, 0, eve.stderr);
    }
    await step('whoami --site as eve', ['whoami', '--site', site], 'eve');
    const hers = await step('eve lists companies', ['data', 'list', '--table', 'companies', '--sort', 'id', ...app], 'eve');
    const rows = hers.stdout.split('\n').filter((line) => /^\d+ {2,}\S/.test(line));
    t.true(rows.length === 5 && rows.every((row) => / FR {2,}/.test(row)), `eve sees the 5 French companies only:\n${hers.stdout}`);
    t.regex(hers.stdout, /^5 records$/m);
    await step('the administrator lists them all', ['data', 'list', '--table', 'companies', '--aggregate', 'count', ...app]);

    await step('bucket create', ['bucket', 'create', '--name', "Team's Files", '--app-category', 'attachments', ...app]);
    const handler = write('greeter.js', 'export default async (event) => ({ hello: event.name })\n');
    await step('function create', ['function', 'create', '--name', 'Greeter', '--file', handler, ...app]);
    await step('function invoke', ['function', 'invoke', 'greeter', '--payload', '{"name":"Ada"}', '--json', ...app]);

    // A migration that adds a column, filled in; then its rollback, which would drop the values: confirmed.
    const v2 = JSON.parse(fs.readFileSync(fixture('schemas/companies.json'), 'utf8'));
    v2.fields.push({ name: 'segment', type: 'string' });
    await step('table migrate --preview', ['table', 'migrate', 'companies', '--schema', write('companies-v2.json', v2), '--preview', ...app]);
    await step('table migrate', ['table', 'migrate', 'companies', '--schema', path.join(files, 'companies-v2.json'), ...app]);
    await step('data update', ['data', 'update', '1', '--table', 'companies', '--data', '{"segment":"enterprise"}', ...app]);
    const history = await step('table history', ['table', 'history', 'companies', '--json', ...app]);
    const revision = JSON.parse(history.stdout).results[0].revision_id ?? JSON.parse(history.stdout).results[0].id;
    const rollback = await step('table rollback', ['table', 'rollback', 'companies', '--revision', String(revision), '--yes', ...app]);
    t.regex(rollback.stdout + rollback.stderr, /segment/, 'the values it drops are named');
    const gone = await step('the column is gone', ['data', 'get', '1', '--table', 'companies', '--json', ...app]);
    t.false('segment' in JSON.parse(gone.stdout).data, gone.stdout);
    if (mode === 'remote') t.is((await runCli(['logout'], env)).code, 0);
  }
  const norm = (mode: Mode, text: string) =>
    volatile(text.replaceAll(`shop_${mode}`, 'shop_<mode>').replaceAll(`story-${mode}`, 'story-<mode>').replaceAll(`Story ${mode}`, 'Story <mode>').replaceAll(`shop-${mode}`, 'shop-<mode>').replaceAll(`Shop ${mode}`, 'Shop <mode>'))
      .replace(/"(duration_ms|execution_time_ms|cpu_ms|memory_bytes|invocation_id|id)": [^,\n]+/g, '"$1": <x>')
      .replace(/\d+(\.\d+)? ?ms\b/g, '<ms>')
      .replace(/\b[0-9a-f]{12}\b/g, '<revision>')
      .replace(/(last_login:? +)\S+/g, '$1<login>'); // eve signs in remotely only
  t.deepEqual(
    steps.direct.map((x) => ({ label: x.label, stdout: norm('direct', x.result.stdout), stderr: norm('direct', x.result.stderr) })),
    steps.remote.map((x) => ({ label: x.label, stdout: norm('remote', x.result.stdout), stderr: norm('remote', x.result.stderr) })),
  );
});
