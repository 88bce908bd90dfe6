// `platform login|logout|whoami`, stored credentials, token refresh, and the remote-mode
// failures (not logged in, no API URL).
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { cliEnv, json, runCli, storedLogins, tempConfigDir } from './helpers.ts';

let s: TestServer;
const dirs: string[] = [];
const PASSWORD = 'Login-pass-word-7';

test.before(async () => {
  s = await startTestServer();
  const { access } = await s.login();
  for (const username of ['alice', 'wendy', 'rita', 'lou', 'sam']) {
    const res = await s.api('POST', '/api/cloud/users/', { token: access, body: { username, email: `${username}@example.com`, password: PASSWORD } });
    if (res.status !== 201) throw new Error(`seed failed: ${res.text}`);
  }
});
test.after.always(async () => {
  await s?.close();
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A private config dir for one test (several tests run at once). */
function configDir(): string {
  const dir = tempConfigDir();
  dirs.push(dir);
  return dir;
}

const credentialsFile = (dir: string) => path.join(dir, 'credentials.json');
const stored = (dir: string) => storedLogins(dir)[s.url];

/** Writes a credentials file directly (tokens from the API), as `login` would. */
function storeCredentials(dir: string, creds: { access: string; refresh: string; username: string }): void {
  fs.writeFileSync(credentialsFile(dir), JSON.stringify({ version: 1, apis: { [s.url]: creds } }), { mode: 0o600 });
}

test('login stores the tokens in a 0600 file, prints no token, and the stored token works', async (t) => {
  const dir = path.join(configDir(), 'nested', 'platform');
  // --api-url instead of the environment; the e-mail instead of the username.
  const env = cliEnv(s, dir, { PLATFORM_API_URL: undefined });
  const r = await runCli(['login', '--api-url', s.url, '--username', 'ALICE@example.com', '--password', PASSWORD], env);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `Logged in to ${s.url} as alice.\n`);
  t.is(r.stderr, '');
  t.is(fs.statSync(credentialsFile(dir)).mode & 0o777, 0o600);
  t.is(fs.statSync(dir).mode & 0o777, 0o700);
  const creds = stored(dir);
  t.deepEqual(Object.keys(creds).sort(), ['access', 'refresh', 'username']);
  t.is(creds.username, 'alice');
  for (const tokenText of [creds.access, creds.refresh]) t.false(r.stdout.includes(tokenText) || r.stderr.includes(tokenText));
  const profile = await s.api('GET', '/api/profile/', { token: creds.access });
  t.is(profile.status, 200);
  t.is(profile.body.username, 'alice');

  const whoami = await runCli(['whoami', '--api-url', s.url], env);
  t.is(whoami.code, 0);
  t.regex(whoami.stdout, /^uuid: +[0-9a-f-]{36}\nusername: +alice\nemail: +alice@example\.com\n/);
});

test('login with a wrong password: exit 1, the API message, nothing stored', async (t) => {
  const dir = configDir();
  const r = await runCli(['login', '--username', 'alice', '--password', 'wrong-password-1'], cliEnv(s, dir));
  t.is(r.code, 1);
  t.is(r.stdout, '');
  t.is(r.stderr, 'Error: No active account found with the given credentials.\n');
  t.false(fs.existsSync(credentialsFile(dir)));
});

test('login without a terminal: a missing password is a clear error, not a prompt', async (t) => {
  const r = await runCli(['login', '--username', 'alice'], cliEnv(s, configDir()));
  t.is(r.code, 1);
  t.is(r.stderr, 'Error: Missing --password: pass it as a flag (no terminal to prompt on).\n');
});

test('whoami --json: exactly the profile body of the API', async (t) => {
  const dir = configDir();
  const tokens = await s.login('wendy', PASSWORD);
  storeCredentials(dir, { ...tokens, username: 'wendy' });
  const r = await runCli(['whoami', '--json'], cliEnv(s, dir));
  t.is(r.code, 0);
  t.deepEqual(json(r), (await s.api('GET', '/api/profile/', { token: tokens.access })).body);
});

test('whoami --direct: the explicit system actor', async (t) => {
  const env = cliEnv(s, configDir());
  const r = await runCli(['whoami', '--direct'], env);
  t.is(r.code, 0);
  t.is(r.stdout, 'actor:  system\nname:   cli\naccess: direct database access, every permission (explicit elevation)\n');
  const j = await runCli(['whoami', '--direct', '--json'], env);
  t.deepEqual(json(j), { actor: 'system', name: 'cli', access: 'direct database access, every permission (explicit elevation)' });
});

test('an invalid access token is refreshed once with the stored refresh token, and saved', async (t) => {
  const dir = configDir();
  const tokens = await s.login('rita', PASSWORD);
  storeCredentials(dir, { access: 'expired-or-garbage', refresh: tokens.refresh, username: 'rita' });
  const r = await runCli(['whoami', '--json'], cliEnv(s, dir));
  t.is(r.code, 0, r.stderr);
  t.is(json(r).username, 'rita');
  const creds = stored(dir);
  t.not(creds.access, 'expired-or-garbage');
  t.is(creds.refresh, tokens.refresh);
  t.is((await s.api('GET', '/api/profile/', { token: creds.access })).body.username, 'rita');
  t.is(fs.statSync(credentialsFile(dir)).mode & 0o777, 0o600);
});

test('a session whose refresh token was revoked: exit 1, told to log in again', async (t) => {
  const dir = configDir();
  const tokens = await s.login('sam', PASSWORD);
  await s.api('POST', '/api/auth/jwt/token/blacklist/', { body: { refresh: tokens.refresh } });
  storeCredentials(dir, { access: 'expired-or-garbage', refresh: tokens.refresh, username: 'sam' });
  const r = await runCli(['user', 'list'], cliEnv(s, dir));
  t.is(r.code, 1);
  t.is(r.stderr, `Error: Your session at ${s.url} has ended (Token is blacklisted.): run \`platform login\` again.\n`);
});

test('logout blacklists the refresh token (the API then refuses it) and forgets the credentials', async (t) => {
  const dir = configDir();
  const env = cliEnv(s, dir);
  t.is((await runCli(['login', '--username', 'lou', '--password', PASSWORD], env)).code, 0);
  const { refresh } = stored(dir);
  const r = await runCli(['logout'], env);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, `Logged out of ${s.url}.\n`);
  t.false(fs.existsSync(credentialsFile(dir)), 'nothing remembered');
  const refused = await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh } });
  t.is(refused.status, 401);
  t.is(refused.body.message, 'Token is blacklisted.');
  const again = await runCli(['logout', '--json'], env);
  t.deepEqual(json(again), { status: 'success', message: `Not logged in to ${s.url}.` });
});

test('remote mode without login: exit 1 with a clear message (and the error body with --json)', async (t) => {
  const env = cliEnv(s, configDir());
  const r = await runCli(['user', 'list'], env);
  t.is(r.code, 1);
  t.is(r.stdout, '');
  t.is(r.stderr, `Error: Not logged in to ${s.url}: run \`platform login\` first (or use --direct to work on the database).\n`);
  const j = await runCli(['whoami', '--json'], env);
  t.is(j.code, 1);
  t.like(json(j), { status: 'error', code: 'AUTHENTICATION_FAILED', detail: 'Authentication credentials were not provided.' });
});

test('remote mode without an API URL: exit 1, told to pass --api-url or use --direct', async (t) => {
  const r = await runCli(['user', 'get', 'alice'], cliEnv(s, configDir(), { PLATFORM_API_URL: undefined }));
  t.is(r.code, 1);
  t.is(r.stderr, 'Error: No API URL: pass --api-url, set PLATFORM_API_URL, or run `platform login --api-url URL` once (the profile remembers it), or use --direct to work on the database.\n');
});

test('one login serves every site the user administers: site commands exchange the platform login for a site token', async (t) => {
  const dir = configDir();
  const env = cliEnv(s, dir);
  t.is((await runCli(['login', '--username', 'sam', '--password', PASSWORD], env)).code, 0);
  const org = await runCli(['org', 'create', '--name', 'Sam Co', '--json'], env);
  t.is(org.code, 0, org.stderr);
  const site = await runCli(['site', 'create', '--org', json(org).data.slug, '--name', 'Sam shop', '--schema-name', 'sam_shop', '--json'], env);
  t.is(site.code, 0, site.stderr);
  // No `login --site`: the owner's platform login is exchanged for the site token, stored beside it.
  const apps = await runCli(['app', 'list', '--site', 'sam_shop', '--json'], env);
  t.is(apps.code, 0, apps.stderr);
  t.is(json(apps).status, 'success');
  const apis = storedLogins(dir);
  t.deepEqual(Object.keys(apis).sort(), [s.url, `${s.url}/sites/sam_shop`]);
  t.is(apis[`${s.url}/sites/sam_shop`].username, 'sam');
  const created = await runCli(['app', 'create', 'Sam app', '--site', 'sam_shop', '--json'], env);
  t.is(created.code, 0, created.stderr);
  const [linked] = await s.handle.db.orm.em.fork().execute(
    `SELECT u.uuid FROM sam_shop.users u JOIN public.users p ON p.uuid = u.platform_user_uuid WHERE p.username = 'sam'`,
  );
  t.is(json(created).data.created_by, linked.uuid, 'the actor is the site user linked to sam');

  // A user who administers no site gets the old message: log in to the site itself.
  const other = configDir();
  const otherEnv = cliEnv(s, other);
  t.is((await runCli(['login', '--username', 'rita', '--password', PASSWORD], otherEnv)).code, 0);
  const refused = await runCli(['app', 'list', '--site', 'sam_shop'], otherEnv);
  t.is(refused.code, 1);
  t.is(refused.stderr, `Error: Site "sam_shop" not found.\n`, 'a site rita may not even view does not exist for her (named as she named it, never by its UUID)');
  // Logging out ends the exchanged site session too: its refresh token is blacklisted, then forgotten.
  const siteRefresh = apis[`${s.url}/sites/sam_shop`].refresh;
  const out = await runCli(['logout'], env);
  t.is(out.code, 0, out.stderr);
  t.false(fs.existsSync(path.join(dir, 'credentials.json')), 'nothing remembered');
  t.is((await s.api('POST', '/sites/sam_shop/api/auth/jwt/token/refresh/', { body: { refresh: siteRefresh } })).status, 401);
});

test('login --api-url is remembered: the README sequence (login, then whoami) needs no URL again; profiles keep connections apart', async (t) => {
  const dir = configDir();
  const env = cliEnv(s, dir, { PLATFORM_API_URL: undefined });
  const login = await runCli(['login', '--api-url', s.url, '--username', 'lou', '--password', PASSWORD], env);
  t.is(login.code, 0, login.stderr);
  t.is(login.stdout, `Logged in to ${s.url} as lou.\n`);
  const who = await runCli(['whoami', '--json'], env);
  t.is(who.code, 0, who.stderr);
  t.is(json(who).username, 'lou');

  // A second, named profile on the same API as another user: --profile or PLATFORM_PROFILE.
  const staging = await runCli(['login', '--api-url', `${s.url}/`, '--profile', 'staging', '--username', 'wendy', '--password', PASSWORD, '--json'], env);
  t.is(staging.code, 0, staging.stderr);
  t.like(json(staging), { status: 'success', message: `Logged in to ${s.url} as wendy (profile staging).`, profile: 'staging', username: 'wendy' });
  t.is(json(await runCli(['whoami', '--json', '--profile', 'staging'], env)).username, 'wendy');
  t.is(json(await runCli(['whoami', '--json'], { ...env, PLATFORM_PROFILE: 'staging' })).username, 'wendy');
  t.is(json(await runCli(['whoami', '--json'], env)).username, 'lou', 'the default profile is untouched');
  t.is(storedLogins(dir, 'staging')[s.url].username, 'wendy');
  t.is(fs.statSync(path.join(dir, 'credentials.json')).mode & 0o777, 0o600);

  // logout clears the default profile (its URL too); the other one stays.
  const refresh = storedLogins(dir)[s.url].refresh;
  const out = await runCli(['logout'], env);
  t.is(out.code, 0, out.stderr);
  t.is(out.stdout, `Logged out of ${s.url}.\n`);
  t.is((await s.api('POST', '/api/auth/jwt/token/refresh/', { body: { refresh } })).status, 401, 'blacklisted');
  const gone = await runCli(['whoami'], env);
  t.is(gone.code, 1);
  t.regex(gone.stderr, /^Error: No API URL: pass --api-url/);
  t.is(json(await runCli(['whoami', '--json', '--profile', 'staging'], env)).username, 'wendy');

  const bad = await runCli(['whoami', '--profile', '../etc'], env);
  t.is(bad.code, 1);
  t.is(bad.stderr, 'Error: Invalid profile "../etc": letters, digits, ".", "_" and "-", at most 64.\n');
});

test('--direct --as: the command runs as that user, with that user\'s rights (in process, no token)', async (t) => {
  const env = cliEnv(s, configDir());
  const who = await runCli(['whoami', '--direct', '--as', 'wendy', '--json'], env);
  t.is(who.code, 0, who.stderr);
  t.is(json(who).username, 'wendy');
  // wendy is no superuser: another user's account is hidden from her, as over HTTP.
  const other = await runCli(['user', 'get', 'alice', '--direct', '--as', 'wendy'], env);
  t.is(other.code, 1);
  t.regex(other.stderr, /^Error: /);
  t.not(other.stderr, '');
  const root = await runCli(['user', 'get', 'alice', '--direct', '--json'], env);
  t.is(root.code, 0, root.stderr);
  const unknown = await runCli(['whoami', '--direct', '--as', 'nobody-here'], env);
  t.is(unknown.code, 1);
  t.is(unknown.stderr, 'Error: No active user "nobody-here" on the platform (--as).\n');
  // --as needs --direct: remotely the actor is the stored login's.
  const usage = await runCli(['whoami', '--as', 'wendy'], env);
  t.is(usage.code, 2);
});
