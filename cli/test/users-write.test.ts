// `platform user create|update|delete` in both modes: identical output (ids and times aside),
// and the state read back through the API.
import fs from 'node:fs';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, storeLogin, tempConfigDir, volatile, type Mode } from './helpers.ts';

let s: TestServer;
let configDir: string;
let token: string;
const both = bothModesMacro(() => cliEnv(s, configDir));
const PASSWORD = 'Str0ng-pass-word';

test.before(async () => {
  s = await startTestServer();
  configDir = tempConfigDir();
  await storeLogin(s, configDir);
  token = (await s.login()).access;
  for (const mode of ['remote', 'direct'] as Mode[]) {
    for (const username of [`upd-${mode}`, `del-${mode}`, `gone-${mode}`]) {
      const res = await s.api('POST', '/api/cloud/users/', { token, body: { username, password: PASSWORD, email: `${username}@example.com`, is_staff: true } });
      if (res.status !== 201) throw new Error(`seed failed: ${res.text}`);
    }
  }
});
test.after.always(async () => {
  await s?.close();
  if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
});

const getUser = (ref: string) => s.api('GET', `/api/cloud/users/${ref}/`, { token });

test('user create --json: the API body {status, message, data}; the user exists and can log in', both, {
  args: (mode) => ['user', 'create', '--username', `carol-${mode}`, '--email', `carol-${mode}@example.com`, '--password', PASSWORD, '--first-name', 'Carol', '--staff', '--json'],
  normalize: volatile,
  async check(t, r, mode) {
    t.is(r.code, 0);
    t.is(r.stderr, '');
    const body = json(r);
    t.deepEqual(Object.keys(body), ['status', 'message', 'data']);
    t.is(body.status, 'success');
    t.is(body.message, 'User created successfully.');
    const api = await getUser(`carol-${mode}`);
    t.is(api.status, 200);
    t.deepEqual(body.data, api.body);
    t.like(api.body, { username: `carol-${mode}`, email: `carol-${mode}@example.com`, first_name: 'Carol', is_staff: true, is_superuser: false, is_active: true });
    t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: `carol-${mode}`, password: PASSWORD } })).status, 200);
  },
});

test('user create without --username: readable message and the generated username', both, {
  args: (mode) => ['user', 'create', '--email', `erin.${mode}@example.com`, '--password', PASSWORD, '--last-name', 'Ek', '--no-active'],
  normalize: volatile,
  async check(t, r, mode) {
    t.is(r.code, 0);
    const lines = r.stdout.split('\n');
    t.is(lines[0], 'User created successfully.');
    t.is(lines[2], `username:      erin-${mode}`);
    t.is(lines[6], 'is_active:     no');
    t.like((await getUser(`erin-${mode}`)).body, { email: `erin.${mode}@example.com`, last_name: 'Ek', is_active: false });
  },
});

test('user create with an invalid e-mail: exit 1, one line naming the field, nothing created', both, {
  args: (mode) => ['user', 'create', '--username', `bad-${mode}`, '--email', 'not-an-email', '--password', PASSWORD],
  async check(t, r, mode) {
    t.is(r.code, 1);
    t.is(r.stdout, '');
    t.is(r.stderr, 'Error: Invalid input.\n  email: Enter a valid email address.\n');
    t.is((await getUser(`bad-${mode}`)).status, 404);
  },
});

test('user update --json: the API user body; the change is stored', both, {
  args: (mode) => ['user', 'update', `upd-${mode}`, '--first-name', 'Ann', '--email', `ann-${mode}@example.com`, '--no-staff', '--json'],
  normalize: volatile,
  async check(t, r, mode) {
    t.is(r.code, 0);
    const api = await getUser(`upd-${mode}`);
    t.deepEqual(json(r), api.body);
    t.like(api.body, { first_name: 'Ann', email: `ann-${mode}@example.com`, is_staff: false, is_active: true });
  },
});

test('user delete: the message; the user is soft-deleted and can no longer log in', both, {
  args: (mode) => ['user', 'delete', `del-${mode}`],
  async check(t, r, mode) {
    t.is(r.code, 0);
    t.is(r.stdout, 'User deleted.\n');
    t.is(r.stderr, '');
    t.like((await getUser(`del-${mode}`)).body, { is_deleted: true, is_active: false });
    t.is((await s.api('POST', '/api/auth/jwt/token/', { body: { username: `del-${mode}`, password: PASSWORD } })).status, 401);
  },
});

test('user delete --json: {status, message}; the default list no longer shows the user', both, {
  args: (mode) => ['user', 'delete', `gone-${mode}`, '--json'],
  async check(t, r, mode) {
    t.is(r.code, 0);
    t.deepEqual(json(r), { status: 'success', message: 'User deleted.' });
    t.is((await s.api('GET', `/api/cloud/users/?search=gone-${mode}`, { token })).body.count, 0);
    t.is((await s.api('GET', `/api/cloud/users/?search=gone-${mode}&is_deleted=true`, { token })).body.count, 1);
  },
});
