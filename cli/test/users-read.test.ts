// `platform user list|get` and failures, in both modes: identical output, and equal to the API's bodies.
import fs from 'node:fs';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, storeLogin, tempConfigDir } from './helpers.ts';

let s: TestServer;
let configDir: string;
let token: string;
const both = bothModesMacro(() => cliEnv(s, configDir));

test.before(async () => {
  s = await startTestServer();
  configDir = tempConfigDir();
  await storeLogin(s, configDir);
  token = (await s.login()).access;
  const seed = [
    { username: 'lst-a', email: 'lst-a@example.com', first_name: 'Ann', last_name: 'Lee' },
    { username: 'lst-b', email: 'lst-b@example.com', is_staff: true },
    { username: 'lst-c', email: 'lst-c@example.com', is_active: false },
    { username: 'getme', email: 'getme@example.com', first_name: 'Gert' },
  ];
  for (const user of seed) {
    const res = await s.api('POST', '/api/cloud/users/', { token, body: { password: 'Seed-password-42', ...user } });
    if (res.status !== 201) throw new Error(`seed failed: ${res.text}`);
  }
});
test.after.always(async () => {
  await s?.close();
  if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
});

test('user list --json: the API pagination body, with the same next link in both modes', both, {
  args: ['user', 'list', '--search', 'lst-', '--is-active', 'all', '--ordering', 'username', '--page-size', '2', '--json'],
  async check(t, r) {
    t.is(r.code, 0);
    t.is(r.stderr, '');
    const body = json(r);
    const api = await s.api('GET', '/api/cloud/users/?search=lst-&ordering=username&is_active=all&page_size=2', { token });
    t.deepEqual(body, api.body);
    t.is(body.count, 3);
    t.deepEqual(body.results.map((u: { username: string }) => u.username), ['lst-a', 'lst-b']);
    t.is(body.next, `${s.url}/api/cloud/users/?search=lst-&ordering=username&is_active=all&page_size=2&page=2`);
    t.is(body.previous, null);
    // The link leads to the rest.
    const next = await s.api('GET', body.next.slice(s.url.length), { token });
    t.deepEqual(next.body.results.map((u: { username: string }) => u.username), ['lst-c']);
  },
});

test('user list: an aligned table with a footer; inactive users filtered by default are shown with --is-active all', both, {
  args: ['user', 'list', '--search', 'lst-', '--ordering', '-username', '--page', '2', '--page-size', '1', '--is-active', 'all'],
  check(t, r) {
    t.is(r.code, 0);
    const lines = r.stdout.split('\n');
    t.regex(lines[0], /^USERNAME {2}E-MAIL +NAME +ACTIVE {2}STAFF {2}SUPERUSER {2}DELETED {2}JOINED +LAST LOGIN$/);
    t.regex(lines[1], /^lst-b {5}lst-b@example\.com {8}yes {5}yes {4}no {9}no {7}\d{4}-\d\d-\d\d \d\d:\d\d {2}-$/);
    t.is(lines.slice(2).join('\n'), '\n3 users, 1 shown (next: --page 3)\n');
  },
});

test('user get: by username or UUID, --json gives the API body, readable gives key: value lines', async (t) => {
  const api = await s.api('GET', '/api/cloud/users/getme/', { token });
  const env = cliEnv(s, configDir);
  for (const extra of [[], ['--direct']]) {
    const byUuid = await runCli(['user', 'get', api.body.uuid, '--json', ...extra], env);
    t.is(byUuid.code, 0);
    t.deepEqual(json(byUuid), api.body);
    const readable = await runCli(['user', 'get', 'GETME', ...extra], env);
    t.is(readable.code, 0);
    t.is(
      readable.stdout,
      [
        `uuid:          ${api.body.uuid}`,
        'username:      getme',
        'email:         getme@example.com',
        'first_name:    Gert',
        'last_name:',
        'is_active:     yes',
        'is_deleted:    no',
        'is_staff:      no',
        'is_superuser:  no',
        `date_joined:   ${api.body.date_joined}`,
        `modified:      ${api.body.modified}`,
        'last_login:    -',
        'pending_email:',
        '',
      ].join('\n'),
    );
  }
});

test('user get of an unknown user: exit 1, one line on stderr', both, {
  args: ['user', 'get', 'ghost'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stdout, '');
    t.is(r.stderr, 'Error: User not found.\n');
  },
});

test('user delete of an unknown user with --json: the API error body on stdout', both, {
  args: ['user', 'delete', 'ghost', '--json'],
  async check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, '');
    const api = await s.api('DELETE', '/api/cloud/users/ghost/', { token });
    t.is(api.status, 404);
    t.deepEqual(json(r), api.body);
  },
});
