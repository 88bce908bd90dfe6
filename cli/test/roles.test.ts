// `platform role …` in both modes (remote: <api-url>/sites/<schema>/api/… with the site's login;
// direct: the site schema as the system actor, or --as a site user): the same output.
import fs from 'node:fs';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, siteWithLogin, volatile, type Mode } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let admin: string;

const both = bothModesMacro(() => cliEnv(s, configDir));
const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });
const at = (mode: Mode, args: string[]) => runCli(mode === 'direct' ? [...args, '--site', site.schema, '--direct'] : [...args, '--site', site.schema], cliEnv(s, configDir));

async function seed(method: string, p: string, body?: unknown): Promise<any> {
  const res = await api(method, p, body);
  if (res.status >= 300) throw new Error(`${method} ${p}: ${res.text}`);
  return res.body;
}

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  await seed('POST', '/api/apps/', { name: 'Crm' });
  await seed('POST', '/api/apps/crm/roles/', { name: 'base', description: 'Everyone' });
  await seed('POST', '/api/apps/crm/roles/', { name: 'sales', parent_name: 'base', description: 'Sellers' });
  await seed('POST', '/api/users/', { username: 'alice', email: 'alice@example.com', password: 'Long-enough-pass-1' });
});
test.after.always(async () => {
  await s?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
});

test.serial('role list: the same table in both modes', both, {
  args: () => ['role', 'list', '--site', site.schema, '--app', 'crm'],
  normalize: volatile,
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, /^NAME +PARENT +DESCRIPTION +MODIFIED\nbase +- +Everyone +\d{4}-\d\d-\d\d \d\d:\d\d\nsales +base +Sellers +\d{4}-\d\d-\d\d \d\d:\d\d\n\n2 roles\n$/);
  },
});

test.serial('role create, get, update, delete: the API bodies, alike in both modes', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of ['remote', 'direct'] as Mode[]) {
    const created = await at(mode, ['role', 'create', `lead-${mode}`, '--parent', 'sales', '--description', 'Leads', '--app', 'crm', '--json']);
    t.is(created.code, 0, created.stderr);
    t.like(json(created), { status: 'success', message: 'Role created.', data: { name: `lead-${mode}`, parent_name: 'sales', description: 'Leads' } });
    const updated = await at(mode, ['role', 'update', `lead-${mode}`, '--no-parent', '--new-name', `head-${mode}`, '--app', 'crm']);
    t.is(updated.code, 0, updated.stderr);
    t.regex(updated.stdout, new RegExp(`^name: +head-${mode}\ndescription: +Leads\nparent_name: +-\n`));
    const got = await at(mode, ['role', 'get', `head-${mode}`, '--app', 'crm', '--json']);
    t.like(json(got), { name: `head-${mode}`, parent_name: null });
    const cycle = await at(mode, ['role', 'update', 'base', '--parent', 'sales', '--app', 'crm']);
    t.is(cycle.code, 1);
    const deleted = await at(mode, ['role', 'delete', `head-${mode}`, '--app', 'crm']);
    t.is(deleted.stdout, `Role "head-${mode}" deleted.\n`);
    for (const r of [created, updated, got, cycle, deleted]) out[mode].push(volatile(r.stdout.replaceAll(mode, '<m>')), volatile(r.stderr.replaceAll(mode, '<m>')));
  }
  t.deepEqual(out.direct, out.remote);
  t.is(out.remote[7], 'Error: Invalid input.\n  parent_name: "sales" inherits from "base": a role cannot have its own descendant as parent.\n');
  t.is((await api('GET', '/api/apps/crm/roles/head-remote/')).status, 404);
});

test.serial('role assign, assignments, unassign; a reserved name refused alike in both modes', async (t) => {
  for (const mode of ['remote', 'direct'] as Mode[]) {
    await seed('POST', '/api/apps/crm/roles/', { name: `holder-${mode}` });
    const assigned = await at(mode, ['role', 'assign', `holder-${mode}`, 'alice', '--app', 'crm']);
    t.is(assigned.code, 0, assigned.stderr);
    t.regex(assigned.stdout, /^Role assigned\.\nuuid: +\S+\nusername: +alice\nemail: +alice@example\.com\nassigned_at: /);
    const again = await at(mode, ['role', 'assign', `holder-${mode}`, 'alice', '--app', 'crm', '--json']);
    t.is(json(again).message, 'The user already holds this role.');
    const list = await at(mode, ['role', 'assignments', `holder-${mode}`, '--app', 'crm']);
    t.regex(list.stdout, /^USERNAME +E-MAIL +UUID +ASSIGNED\nalice +alice@example\.com +[0-9a-f-]{36} +\d{4}-.*\n\n1 holder\n$/);
    const unassigned = await at(mode, ['role', 'unassign', `holder-${mode}`, 'alice', '--app', 'crm']);
    t.is(unassigned.stdout, 'Role unassigned.\n');
    t.is((await api('GET', `/api/apps/crm/roles/holder-${mode}/assignments/`)).body.count, 0);
  }
  const unknown = await at('remote', ['role', 'assign', 'base', 'nobody', '--app', 'crm']);
  t.is(unknown.stderr, 'Error: User "nobody" not found.\n');
});

test.serial('role create admin: refused, the same error in both modes', both, {
  args: () => ['role', 'create', 'admin', '--site', site.schema, '--app', 'crm'],
  check(t, r) {
    t.is(r.code, 1);
    t.regex(r.stderr, /^Error: Invalid input\.\n {2}name: "admin" is a reserved role name: /);
  },
});

test.serial('role mine: a site user\'s own roles (remote with the site login; direct --as that user)', both, {
  args: (mode) => ['role', 'mine', '--site', site.schema, '--app', 'crm', ...(mode === 'direct' ? ['--as', 'boss'] : [])],
  check(t, r) {
    t.is(r.code, 0, r.stderr);
    t.is(r.stdout, 'admin\n');
  },
});

test.serial("user attributes: a site user's policy attributes shown and replaced, alike in both modes; bad JSON and reserved names refused", async (t) => {
  for (const mode of ['remote', 'direct'] as Mode[]) {
    const set = await at(mode, ['user', 'attributes', 'alice', '--set', `{"country": "FR", "mode": "${mode}", "teams": ["sales"]}`]);
    t.is(set.code, 0, set.stderr);
    t.deepEqual(JSON.parse(set.stdout), { country: 'FR', mode, teams: ['sales'] });
    t.regex(set.stdout, /^\{\n {2}"/); // indented, one attribute a line
    const shown = await at(mode, ['user', 'attributes', 'alice', '--json']);
    t.like(json(shown), { username: 'alice', attributes: { country: 'FR', mode, teams: ['sales'] } });
    const bad = await at(mode, ['user', 'attributes', 'alice', '--set', '{"country": ']);
    t.not(bad.code, 0);
    t.regex(bad.stderr, /Invalid JSON in attributes/);
    const reserved = await at(mode, ['user', 'attributes', 'alice', '--set', '{"tenant_id": "other"}']);
    t.not(reserved.code, 0);
    t.regex(reserved.stderr, /tenant_id/);
  }
  const stored = await api('GET', '/api/users/alice/');
  t.deepEqual(stored.body.attributes, { country: 'FR', mode: 'direct', teams: ['sales'] });
});
