// `platform user create|list|get|update|delete --site S` and `whoami --site S`: a site's own
// users from the CLI, in both modes (identical output), the site's state read back through
// the API; another site's login reaches none of them.
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, siteWithLogin, tempConfigDir, volatile, SITE_PASSWORD } from './helpers.ts';

let s: TestServer;
let schema: string;
let admin: string;
let configDir: string;
let otherConfigDir: string;
let otherSchema: string;
const both = bothModesMacro(() => cliEnv(s, configDir));

test.before(async () => {
  s = await startTestServer();
  ({ site: { schema }, admin, configDir } = await siteWithLogin(s));
  ({ site: { schema: otherSchema }, configDir: otherConfigDir } = await siteWithLogin(s));
  for (const mode of ['remote', 'direct']) {
    for (const username of [`upd-${mode}`, `del-${mode}`, `list-${mode}`]) {
      const res = await s.api('POST', `/sites/${schema}/api/users/`, { token: admin, body: { username, password: SITE_PASSWORD, email: `${username}@example.com` } });
      if (res.status !== 201) throw new Error(res.text);
    }
  }
});
test.after.always(async () => {
  await s?.close();
  for (const dir of [configDir, otherConfigDir]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const siteUser = (ref: string) => s.api('GET', `/sites/${schema}/api/users/${ref}/`, { token: admin });

test('user create --site: a user of the site (not of the platform) who can sign in there', both, {
  args: (mode) => ['user', 'create', '--site', schema, '--username', `ann-${mode}`, '--email', `ann-${mode}@example.com`, '--password', SITE_PASSWORD, '--json'],
  normalize: volatile,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.is(json(r).data.username, `ann-${mode}`);
    t.is((await siteUser(`ann-${mode}`)).status, 200);
    t.is((await s.api('POST', `/sites/${schema}/api/auth/jwt/token/`, { body: { username: `ann-${mode}`, password: SITE_PASSWORD } })).status, 200);
    const token = (await s.login()).access;
    t.is((await s.api('GET', `/api/cloud/users/ann-${mode}/`, { token })).status, 404, 'not a platform user');
  },
});

test('user list --site: the site users as a table', both, {
  args: () => ['user', 'list', '--site', schema, '--search', 'list-'],
  normalize: volatile,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /list-remote/);
    t.regex(r.stdout, /list-direct/);
    t.notRegex(r.stdout, /admin/);
  },
});

test('user get --site and whoami --site', async (t) => {
  const env = cliEnv(s, configDir);
  const got = await runCli(['user', 'get', 'upd-remote', '--site', schema, '--json'], env);
  t.is(got.code, 0, got.stderr);
  t.is(json(got).username, 'upd-remote');
  t.true('attributes' in json(got));
  const who = await runCli(['whoami', '--site', schema, '--json'], env);
  t.is(who.code, 0, who.stderr);
  t.is(json(who).username, 'boss');
  const as = await runCli(['whoami', '--site', schema, '--direct', '--as', 'upd-direct', '--json'], env);
  t.is(as.code, 0, as.stderr);
  t.is(json(as).username, 'upd-direct');
});

test('user update --site: fields and attributes', both, {
  args: (mode) => ['user', 'update', `upd-${mode}`, '--site', schema, '--first-name', 'Ulla', '--attributes', '{"country":"FR"}'],
  normalize: volatile,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.like((await siteUser(`upd-${mode}`)).body, { first_name: 'Ulla', attributes: { country: 'FR' } });
  },
});

test('user delete --site', both, {
  args: (mode) => ['user', 'delete', `del-${mode}`, '--site', schema],
  normalize: volatile,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.like((await siteUser(`del-${mode}`)).body, { is_deleted: true, is_active: false });
  },
});

test("a flag of the other kind of user is refused by name, nothing sent", both, {
  args: () => ['user', 'update', 'upd-remote', '--site', schema, '--restore'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr.trim(), "Error: --restore applies to the platform's users (without --site) only.");
  },
});

test("--attributes without --site: refused, it is a site user's field", async (t) => {
  const r = await runCli(['user', 'update', 'admin', '--attributes', '{}', '--direct'], cliEnv(s, configDir));
  t.is(r.code, 1);
  t.is(r.stderr.trim(), "Error: --attributes applies to a site's users (--site) only.");
});

test("another site's login reaches none of this site's users", async (t) => {
  const env = cliEnv(s, otherConfigDir);
  // The other site's login is stored for its own URL: this site has none, and there is no platform login to exchange.
  const r = await runCli(['user', 'list', '--site', schema], env);
  t.is(r.code, 1);
  t.regex(r.stderr, /Not logged in to .*\/sites\//);
  // Its token stored under this site's URL: refused by the site.
  const file = path.join(otherConfigDir, 'credentials.json');
  const stored = JSON.parse(fs.readFileSync(file, 'utf8'));
  const forged = { version: 1, apis: { ...stored.apis, [`${s.url}/sites/${schema}`]: stored.apis[`${s.url}/sites/${otherSchema}`] } };
  const forgedDir = tempConfigDir();
  fs.writeFileSync(path.join(forgedDir, 'credentials.json'), JSON.stringify(forged), { mode: 0o600 });
  const swapped = await runCli(['user', 'list', '--site', schema, '--json'], cliEnv(s, forgedDir));
  fs.rmSync(forgedDir, { recursive: true, force: true });
  t.is(swapped.code, 1);
  t.is(json(swapped).status, 'error');
  t.notRegex(swapped.stdout, /upd-remote/);
  const own = await runCli(['user', 'list', '--site', otherSchema, '--search', 'upd-', '--json'], env);
  t.is(own.code, 0, own.stderr);
  t.is(json(own).count, 0);
});
