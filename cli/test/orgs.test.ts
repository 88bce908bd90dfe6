// `platform org|member|group …` in both modes: identical output (ids and times aside), equal
// to the API's bodies, and the state read back through the API. Serial: each test spawns two
// CLI processes, and the machines here have few cores.
import fs from 'node:fs';
import test from 'ava';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, storeLogin, tempConfigDir, volatile, type Mode } from './helpers.ts';

let s: TestServer;
let configDir: string;
let token: string;
const both = bothModesMacro(() => cliEnv(s, configDir));
const PASSWORD = 'Str0ng-pass-word';
const groupIds = {} as Record<string, number>;
/** `volatile`, and integer group ids (they differ between the two runs). */
const normalize = (text: string) => volatile(text).replace(/"id": \d+/g, '"id": <id>').replace(/^id:(\s+)\d+$/gm, 'id:$1<id>').replace(/\(\d+\)/g, '(<id>)');

const api = (method: string, path: string, body?: unknown) => s.api(method, path, { token, body });

test.before(async () => {
  s = await startTestServer();
  configDir = tempConfigDir();
  await storeLogin(s, configDir);
  token = (await s.login()).access;
  const ok = (res: { status: number; text: string }) => {
    if (res.status >= 300) throw new Error(`seed failed: ${res.text}`);
  };
  ok(await api('POST', '/api/cloud/organizations/', { name: 'CLI Seed', slug: 'cli-seed' }));
  ok(await api('POST', '/api/cloud/organizations/', { name: 'Solo Admin', slug: 'solo-admin' }));
  for (const slug of ['orglst-one', 'orglst-two']) ok(await api('POST', '/api/cloud/organizations/', { name: slug, slug }));
  for (const username of ['mlist-a', 'mlist-b']) {
    ok(await api('POST', '/api/cloud/users/', { username, password: PASSWORD, email: `${username}@example.com` }));
    ok(await api('POST', '/api/cloud/organizations/cli-seed/members/', { user_slug: username }));
  }
  for (const mode of ['remote', 'direct'] as Mode[]) {
    for (const username of [`add-${mode}`, `upd-${mode}`, `rm-${mode}`, `adm-${mode}`]) {
      ok(await api('POST', '/api/cloud/users/', { username, password: PASSWORD, email: `${username}@example.com`, first_name: 'Cli' }));
    }
    for (const username of [`upd-${mode}`, `rm-${mode}`, `adm-${mode}`]) ok(await api('POST', '/api/cloud/organizations/cli-seed/members/', { user_slug: username }));
    for (const slug of [`orgupd-${mode}`, `orgdel-${mode}`]) ok(await api('POST', '/api/cloud/organizations/', { name: slug, slug }));
    for (const name of [`grp-upd-${mode}`, `grp-del-${mode}`, `grp-get-${mode}`]) {
      const res = await api('POST', '/api/cloud/groups/', { name, permissions: ['view_site', 'invite_members'] });
      ok(res);
      groupIds[name] = res.body.data.id;
    }
  }
});
test.after.always(async () => {
  await s?.close();
  if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
});

test.serial('org create --json: the API envelope; the organization exists', both, {
  args: (mode) => ['org', 'create', '--name', `Made By ${mode}`, '--json'],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    const body = json(r);
    t.deepEqual(Object.keys(body), ['status', 'message', 'data']);
    t.is(body.message, 'Organization created successfully.');
    t.is(body.data.slug, `made-by-${mode}`);
    t.deepEqual((await api('GET', `/api/cloud/organizations/made-by-${mode}/`)).body, body.data);
  },
});

test.serial('org create with a bad slug: exit 1, one line naming the field, nothing created', both, {
  args: ['org', 'create', '--name', 'Bad Slug Org', '--slug', 'Not Valid'],
  async check(t, r) {
    t.is(r.code, 1);
    t.is(r.stdout, '');
    t.is(r.stderr, 'Error: Invalid input.\n  slug: Enter a valid value.\n');
    t.is((await api('GET', '/api/cloud/organizations/?search=bad-slug-org')).body.count, 0);
  },
});

test.serial('org list: the API body with --json; a table otherwise', both, {
  args: ['org', 'list', '--search', 'orglst-', '--ordering', '-slug', '--json'],
  async check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.deepEqual(json(r), (await api('GET', '/api/cloud/organizations/?search=orglst-&ordering=-slug')).body);
    t.deepEqual(json(r).results.map((o: { slug: string }) => o.slug), ['orglst-two', 'orglst-one']);
  },
});

test.serial('org list: table and footer', both, {
  args: ['org', 'list', '--search', 'orglst-', '--page-size', '1'],
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    t.regex(lines[0], /^SLUG +NAME +ACTIVE {2}CREATED +MODIFIED$/);
    t.regex(lines[1], /^orglst-one {2}orglst-one {2}yes {5}\d{4}-\d\d-\d\d \d\d:\d\d {2}\d{4}-/);
    t.is(lines.slice(2).join('\n'), '\n2 organizations, 1 shown (next: --page 2)\n');
  },
});

test.serial('org privileges: one permission a line', both, {
  args: ['org', 'privileges', 'cli-seed'],
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, 'view_organization\nchange_organization\ndelete_organization\nmanage_organization\ninvite_members\n');
  },
});

test.serial('org get --json equals the API body', both, {
  args: ['org', 'get', 'cli-seed', '--json'],
  async check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.deepEqual(json(r), (await api('GET', '/api/cloud/organizations/cli-seed/')).body);
  },
});

test.serial('org get of an unknown organization: exit 1 with the API message', both, {
  args: ['org', 'get', 'no-such-org'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, 'Error: Organization not found.\n');
  },
});

test.serial('org update --no-active: hidden from the default list, stored', both, {
  args: (mode) => ['org', 'update', `orgupd-${mode}`, '--name', 'Renamed', '--no-active', '--json'],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    const api1 = await api('GET', `/api/cloud/organizations/orgupd-${mode}/`);
    t.deepEqual(json(r), api1.body);
    t.like(api1.body, { name: 'Renamed', is_active: false });
  },
});

test.serial('org delete: the message; the organization is gone', both, {
  args: (mode) => ['org', 'delete', `orgdel-${mode}`],
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, 'Organization deleted.\n');
    t.is((await api('GET', `/api/cloud/organizations/orgdel-${mode}/`)).status, 404);
  },
});

test.serial('member add: message and the member; exists afterwards', both, {
  args: (mode) => ['member', 'add', `add-${mode}`, '--org', 'cli-seed'],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    t.is(lines[0], 'Member added successfully.');
    t.true(lines.includes(`username:   add-${mode}`), r.stdout);
    t.is((await api('GET', `/api/cloud/organizations/cli-seed/members/add-${mode}/`)).status, 200);
  },
});

test.serial('member list: table and footer', both, {
  args: ['member', 'list', '--org', 'cli-seed', '--search', 'mlist-'],
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    t.regex(lines[0], /^USERNAME +E-MAIL +NAME +ACTIVE {2}ADMIN {2}OWNER {2}GROUPS {2}SITES$/);
    t.regex(lines[1], /^mlist-a +mlist-a@example\.com +yes {5}no {5}no {5}- {7}0$/);
    t.is(lines.slice(3).join('\n'), '\n2 members\n');
  },
});

test.serial('member add of an unknown user: exit 1 naming the field', both, {
  args: ['member', 'add', 'nobody-here', '--org', 'cli-seed'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, 'Error: Invalid input.\n  user_slug: No active user with that username or UUID.\n');
  },
});

test.serial('member list --json equals the API body', both, {
  args: ['member', 'list', '--org', 'cli-seed', '--search', 'mlist-', '--ordering', '-user__username', '--json'],
  async check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.deepEqual(json(r), (await api('GET', '/api/cloud/organizations/cli-seed/members/?search=mlist-&ordering=-user__username')).body);
    t.is(json(r).count, 2);
  },
});

test.serial('member update: admin flag and groups replaced; get shows them', both, {
  args: (mode) => ['member', 'update', `upd-${mode}`, '--org', 'cli-seed', '--admin', '--group', String(groupIds[`grp-get-${mode}`])],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.true(r.stdout.includes(`groups:     grp-get-${mode} (${groupIds[`grp-get-${mode}`]})`), r.stdout);
    const member = (await api('GET', `/api/cloud/organizations/cli-seed/members/upd-${mode}/`)).body;
    t.like(member, { is_admin: true, groups: [{ id: groupIds[`grp-get-${mode}`], name: `grp-get-${mode}` }] });
  },
});

test.serial('member update with an unknown group: exit 1 naming the field', both, {
  args: ['member', 'update', 'adm-remote', '--org', 'cli-seed', '--group', '999999'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, 'Error: Invalid input.\n  groups: Unknown group id: 999999.\n');
  },
});

test.serial('member make-admin', both, {
  args: (mode) => ['member', 'make-admin', `adm-${mode}`, '--org', 'cli-seed'],
  async check(t, r, mode) {
    t.is(r.stdout, 'The member is now an admin.\n');
    t.true((await api('GET', `/api/cloud/organizations/cli-seed/members/adm-${mode}/`)).body.is_admin);
  },
});

test.serial('member remove-admin of the last admin of an organization is refused', both, {
  args: ['member', 'remove-admin', 'root', '--org', 'solo-admin'],
  async check(t, r) {
    t.is(r.code, 1);
    t.is(r.stdout, '');
    t.is(r.stderr, 'Error: This member is the last admin of the organization: make another member an admin first.\n');
    t.true((await api('GET', '/api/cloud/organizations/solo-admin/members/root/')).body.is_admin);
  },
});

test.serial('member remove: message; gone', both, {
  args: (mode) => ['member', 'remove', `rm-${mode}`, '--org', 'cli-seed', '--json'],
  async check(t, r, mode) {
    t.deepEqual(json(r), { status: 'success', message: 'Member removed.' });
    t.is((await api('GET', `/api/cloud/organizations/cli-seed/members/rm-${mode}/`)).status, 404);
  },
});

test.serial('group create --json: the API envelope', both, {
  args: (mode) => ['group', 'create', '--name', `grp-new-${mode}`, '--permission', 'access_site', '--json'],
  normalize,
  async check(t, r) {
    t.is(r.code, 0, r.stderr);
    const body = json(r);
    t.is(body.message, 'Group created successfully.');
    t.deepEqual(body.data.permissions, ['access_site']);
    t.deepEqual((await api('GET', `/api/cloud/groups/${body.data.id}/`)).body, body.data);
  },
});

test.serial('group list: table and footer', both, {
  args: ['group', 'list', '--search', 'grp-get-'],
  normalize,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    const lines = r.stdout.split('\n');
    t.regex(lines[0], /^ID +NAME +PERMISSIONS$/);
    t.regex(lines[1], /^\d+ +grp-get-direct {2}invite_members, view_site$/);
    t.is(lines.at(-2), '2 groups');
  },
});

test.serial('group update replaces the permissions', both, {
  args: (mode) => ['group', 'update', String(groupIds[`grp-upd-${mode}`]), '--name', `grp-renamed-${mode}`, '--permission', 'admin_site'],
  normalize,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^id: +\d+\nname: +grp-renamed-(remote|direct)\npermissions: admin_site\n$/);
    t.deepEqual((await api('GET', `/api/cloud/groups/${groupIds[`grp-upd-${mode}`]}/`)).body.permissions, ['admin_site']);
  },
});

test.serial('group delete', both, {
  args: (mode) => ['group', 'delete', String(groupIds[`grp-del-${mode}`])],
  async check(t, r, mode) {
    t.is(r.stdout, 'Group deleted.\n');
    t.is((await api('GET', `/api/cloud/groups/${groupIds[`grp-del-${mode}`]}/`)).status, 404);
  },
});

test.serial('group get --json equals the API body', both, {
  args: () => ['group', 'get', String(groupIds['grp-get-remote']), '--json'],
  async check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.deepEqual(json(r), (await api('GET', `/api/cloud/groups/${groupIds['grp-get-remote']}/`)).body);
  },
});

test.serial('group get of an unknown id', both, {
  args: ['group', 'get', 'abc'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, 'Error: Group not found.\n');
  },
});
