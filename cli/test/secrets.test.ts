// `platform login --site`, `platform secret …` and `platform secret-type …` in both modes
// (remote: <api-url>/sites/<schema>/api/… with the site's login; direct: the site schema as
// the system actor), and `platform secret rotate`.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { hashPassword } from '../../shared/auth/passwords.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, TEST_SECRET, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, storedLogins, tempConfigDir, volatile } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let rotating: TestSite;
let configDir: string;
let admin: string;
const PASSWORD = 'Site-pass-word-1';
const dirs: string[] = [];

// The actor differs by design (the site user remotely, system:cli directly): compare without it.
const normalize = (text: string) => volatile(text).replace(/\b(boss|system:cli)\b/g, '<actor>');
const both = bothModesMacro(() => cliEnv(s, configDir));
const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });

async function siteLogin(target: TestSite): Promise<{ access: string; refresh: string }> {
  const res = await s.api('POST', `/sites/${target.schema}/api/auth/jwt/token/`, { body: { username: 'boss', password: PASSWORD } });
  if (res.status !== 200) throw new Error(res.text);
  return res.body;
}

test.before(async () => {
  s = await startTestServer();
  const em = s.handle.db.orm.em.fork();
  site = await createTestSite(em);
  rotating = await createTestSite(em);
  for (const target of [site, rotating]) {
    await em.execute(`INSERT INTO "${target.schema}".users (uuid, username, password, is_staff) VALUES (gen_random_uuid(), 'boss', ?, true)`, [await hashPassword(PASSWORD)]);
  }
  const tokens = await siteLogin(site);
  admin = tokens.access;
  configDir = tempConfigDir();
  dirs.push(configDir);
  // As `platform login --site` stores it: under <api-url>/sites/<schema>.
  fs.writeFileSync(path.join(configDir, 'credentials.json'), JSON.stringify({ version: 1, apis: { [`${s.url}/sites/${site.schema}`]: { ...tokens, username: 'boss' } } }), { mode: 0o600 });
  await api('POST', '/api/apps/', { name: 'Shop' }); // a secret's app must be an app of the site
  for (const [key, value, app] of [['SHARED', 'tenant-value'], ['SHARED', 'shop-value', 'shop'], ['LISTED_A', 'a'], ['LISTED_B', 'b'], ['HIST', 'h1']]) {
    const res = await api('POST', '/api/secrets/', { key, value, ...(app ? { app } : {}), description: `seed ${key}` });
    if (res.status !== 201) throw new Error(res.text);
  }
  await api('PUT', '/api/secrets/HIST/', { value: 'h2' });
  for (const mode of ['remote', 'direct']) {
    await api('POST', '/api/secrets/', { key: `UPD-${mode}`, value: 'old' });
    await api('POST', '/api/secrets/', { key: `DEL-${mode}`, value: 'x' });
  }
  await api('POST', '/api/secret-types/', { name: 'Listed type', json_schema: { type: 'object', required: ['user'] } });
});
test.after.always(async () => {
  await s?.close();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

test('login --site stores the site login beside the platform one; site commands use it', async (t) => {
  const dir = tempConfigDir();
  dirs.push(dir);
  const env = cliEnv(s, dir);
  const r = await runCli(['login', '--site', site.schema, '--username', 'boss', '--password', PASSWORD], env);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `Logged in to site ${site.schema} at ${s.url} as boss.\n`);
  const stored = storedLogins(dir);
  t.deepEqual(Object.keys(stored), [`${s.url}/sites/${site.schema}`]);
  const list = await runCli(['secret', 'list', '--site', site.schema, '--search', 'LISTED', '--json'], env);
  t.is(list.code, 0, list.stderr);
  t.is(json(list).count, 2);
  // Not logged in to another site (nor to the platform): a clear message naming the command.
  const other = await runCli(['secret', 'list', '--site', rotating.schema], env);
  t.is(other.code, 1);
  t.is(other.stderr, `Error: Not logged in to ${s.url}/sites/${rotating.schema}: run \`platform login --site ${rotating.schema}\` first (or use --direct to work on the database).\n`);
  // A platform user is not a user of the site.
  const refused = await runCli(['login', '--site', site.schema, '--username', 'root', '--password', 'root-password-1'], env);
  t.is(refused.code, 1);
  t.is(refused.stderr, 'Error: No active account found with the given credentials.\n');
  const out = await runCli(['logout', '--site', site.schema], env);
  t.is(out.stdout, `Logged out of ${s.url}/sites/${site.schema}.\n`);
});

test('secret list: masked values, the same table in both modes', both, {
  args: () => ['secret', 'list', '--site', site.schema, '--search', 'LISTED'],
  normalize,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^KEY +APP +TYPE +VALUE +DESCRIPTION +MODIFIED +BY\nLISTED_A +- +- +\*{8} +seed LISTED_A /);
    t.false(/\b(a|b)\b +seed/.test(r.stdout));
    t.regex(r.stdout, /\n\n2 secrets\n$/);
  },
});

test('secret get --json: the API body; --app falls back to the tenant-wide secret', async (t) => {
  for (const [args, expected] of [
    [['SHARED'], { value: 'tenant-value', inherited_from: null }],
    [['SHARED', '--app', 'shop'], { value: 'shop-value', app: 'shop', inherited_from: null }],
    [['SHARED', '--app', 'blog'], { value: 'tenant-value', app: null, inherited_from: 'tenant' }],
  ] as [string[], Record<string, unknown>][]) {
    const runs = [];
    for (const direct of [false, true]) runs.push(await runCli(['secret', 'get', ...args, '--site', site.schema, '--json', ...(direct ? ['--direct'] : [])], cliEnv(s, configDir)));
    t.is(runs[0].code, 0, runs[0].stderr);
    t.is(runs[1].stdout, runs[0].stdout);
    t.like(json(runs[0]), expected);
  }
});

test('secret set creates, in both modes; the output masks the value', both, {
  args: (mode) => ['secret', 'set', `NEW-${mode}`, `value-of-${mode}`, '--site', site.schema, '--description', 'made by the CLI'],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^Secret created\.\nuuid: /);
    t.false(r.stdout.includes(`value-of-${mode}`));
    t.like((await api('GET', `/api/secrets/NEW-${mode}/`)).body, { value: `value-of-${mode}`, description: 'made by the CLI' });
  },
});

test('secret set updates an existing secret, in both modes', both, {
  args: (mode) => ['secret', 'set', `UPD-${mode}`, '{"n":1}', '--json-value', '--site', site.schema, '--json'],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.like(json(r), { status: 'success', message: 'Secret updated.', data: { key: `UPD-${mode}`, value: '********' } });
    t.deepEqual((await api('GET', `/api/secrets/UPD-${mode}/`)).body.value, { n: 1 });
  },
});

test('secret history: who and when, never values', both, {
  args: () => ['secret', 'history', 'HIST', '--site', site.schema],
  normalize,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^AT +ACTION +KEY +APP +ACTOR\n\S+ \S+ +update +HIST +- +boss\n\S+ \S+ +create +HIST +- +boss\n\n2 changes\n$/);
    t.false(/h1|h2/.test(r.stdout));
  },
});

test('secret delete, in both modes', both, {
  args: (mode) => ['secret', 'delete', `DEL-${mode}`, '--site', site.schema],
  normalize,
  async check(t, r, mode) {
    t.is(r.stdout, 'Secret deleted.\n');
    t.is((await api('GET', `/api/secrets/DEL-${mode}/`)).status, 404);
  },
});

test('secret-type create and get, in both modes', both, {
  args: (mode) => ['secret-type', 'create', '--site', site.schema, '--name', `Token ${mode}`, '--schema', '{"type":"string","minLength":4}'],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, new RegExp(`^Secret type created\\.\\nuuid: +\\S+\\nslug: +token-${mode}\\n`));
    const get = await runCli(['secret-type', 'get', `token-${mode}`, '--site', site.schema, '--json'], cliEnv(s, configDir));
    t.like(json(get), { slug: `token-${mode}`, json_schema: { type: 'string', minLength: 4 } });
  },
});

test('secret-type list', both, {
  args: () => ['secret-type', 'list', '--site', site.schema, '--search', 'Listed'],
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^SLUG +NAME +DESCRIPTION +SCHEMA\nlisted-type +Listed type +\{"type":"object","required":\["user"\]\}\n\n1 secret type\n$/);
  },
});

test('errors are the same in both modes: unknown secret, unknown site, a value its type refuses, a bad key', async (t) => {
  for (const args of [
    ['secret', 'get', 'NOPE', '--site', site.schema],
    ['secret', 'get', 'x', '--site', 'Bad-Name'],
    ['secret', 'set', 'TYPED', '{"nope":1}', '--json-value', '--type', 'listed-type', '--site', site.schema],
    ['secret', 'get', "x' OR 1=1", '--site', site.schema],
    ['secret-type', 'delete', 'nope', '--site', site.schema],
  ]) {
    const remote = await runCli(args, cliEnv(s, configDir));
    const direct = await runCli([...args, '--direct'], cliEnv(s, configDir));
    t.is(remote.code, 1, args.join(' '));
    t.is(direct.code, 1);
    t.is(direct.stderr, remote.stderr, args.join(' '));
  }
  const typed = await runCli(['secret', 'set', 'TYPED', '{"nope":1}', '--json-value', '--type', 'listed-type', '--site', site.schema], cliEnv(s, configDir));
  t.is(typed.stderr, `Error: The value does not match the secret type "listed-type".\n  value: must have required property 'user'\n`);
  // An unknown site, named: directly, 'Site "no_such_site" not found.'; remotely there is no login for it to begin with.
  t.is((await runCli(['secret', 'list', '--site', 'no_such_site', '--direct'], cliEnv(s, configDir))).stderr, 'Error: Site "no_such_site" not found.\n');
  t.regex((await runCli(['secret', 'list', '--site', 'no_such_site'], cliEnv(s, configDir))).stderr, /^Error: Not logged in to \S+\/sites\/no_such_site: /);
});

test('secret rotate re-encrypts with a new key version, and after replacing PLATFORM_SECRET_KEY', async (t) => {
  const tokens = await siteLogin(rotating);
  await s.api('POST', `/sites/${rotating.schema}/api/secrets/`, { token: tokens.access, body: { key: 'ROTATED', value: 'rotate-me' } });
  const versions = async () => ((await s.handle.db.orm.em.fork().execute(`SELECT key_version FROM "${rotating.schema}".secrets`)) as { key_version: number }[]).map((r) => r.key_version);
  t.deepEqual(await versions(), [1]);
  const env2 = cliEnv(s, configDir, { SECRETS_KEY_VERSION: '2' });
  const r = await runCli(['secret', 'rotate', '--site', rotating.schema], env2);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, 'Re-encrypted 1 secret value(s) in 1 site(s) with key version 2.\n');
  t.deepEqual(await versions(), [2]);
  t.is(json(await runCli(['secret', 'get', 'ROTATED', '--site', rotating.schema, '--direct', '--json'], env2)).value, 'rotate-me');
  t.is((await runCli(['secret', 'rotate', '--site', rotating.schema, '--json'], env2)).stdout.includes('"rotated": 0'), true, 'running again is harmless');

  // A new PLATFORM_SECRET_KEY: the old one is named for the versions it wrote.
  const NEW_KEY = 'replacement-secret-key-0123456789abcdef-0123';
  const env3 = cliEnv(s, configDir, { SECRETS_KEY_VERSION: '3', PLATFORM_SECRET_KEY: NEW_KEY, OLD_PLATFORM_KEY: TEST_SECRET });
  const missing = await runCli(['secret', 'rotate', '--site', rotating.schema, '--previous-key-env', 'NOT_SET_ANYWHERE'], env3);
  t.is(missing.stderr, 'Error: The environment variable NOT_SET_ANYWHERE (--previous-key-env) is not set.\n');
  const r3 = await runCli(['secret', 'rotate', '--site', rotating.schema, '--previous-key-env', 'OLD_PLATFORM_KEY'], env3);
  t.is(r3.code, 0, r3.stderr);
  t.deepEqual(await versions(), [3]);
  t.is(json(await runCli(['secret', 'get', 'ROTATED', '--site', rotating.schema, '--direct', '--json'], env3)).value, 'rotate-me');
  t.is((await runCli(['secret', 'rotate', '--site', 'no_such_site'], env3)).stderr, 'Error: Site "no_such_site" not found.\n');
});
