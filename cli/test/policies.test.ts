// `platform policy …` in both modes (remote: <api-url>/sites/<schema>/api/apps/<app>/… with the
// site's login; direct: the site schema as the system actor): the same output, the state read back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { bothModesMacro, cliEnv, json, runCli, siteWithLogin, volatile } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let admin: string;
let files: string;

const both = bothModesMacro(() => cliEnv(s, configDir));
const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });
const at = ['--site', '', '--app', 'crm'];
const args = (...a: string[]) => [...a, ...at.map((x) => (x === '' ? site.schema : x))];
const scope = () => `${site.schema}_crm`;

function file(name: string, body: unknown): string {
  const f = path.join(files, name);
  fs.writeFileSync(f, JSON.stringify(body));
  return f;
}

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  files = fs.mkdtempSync(path.join(os.tmpdir(), 'policy-cli-'));
  if ((await api('POST', '/api/apps/', { name: 'CRM' })).status !== 201) throw new Error('app');
  const seed = await api('POST', '/api/apps/crm/policies/', {
    policies: [
      { policy_type: 'derived_role', name: 'owners', definitions: [{ name: 'owner', parentRoles: ['member'], condition: { match: { expr: 'R.attr.owner == P.id' } } }] },
      {
        policy_type: 'resource', entity_type: 'seed', name: 'ticket', import_derived_roles: ['owners'],
        rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'] }, { actions: ['update'], effect: 'EFFECT_ALLOW', derived_roles: ['owner'] }],
      },
    ],
  });
  if (seed.status !== 201) throw new Error(seed.text);
  for (const mode of ['remote', 'direct']) {
    await api('POST', '/api/apps/crm/policies/', { policy_type: 'resource', entity_type: `${mode}-gone`, name: 'x', rules: [] });
  }
});
test.after.always(async () => {
  await s?.close();
  fs.rmSync(configDir, { recursive: true, force: true });
  fs.rmSync(files, { recursive: true, force: true });
});

test('policy put and create: from a file in either form; POST refuses a role policy', async (t) => {
  await both.exec(t, {
    args: (mode) => args('policy', 'put', '--file', file(`${mode}.json`, { resourcePolicy: { resource: `${mode}-doc:report`, version: 'default', rules: [{ actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['member'] }] } })),
    normalize: volatile,
    async check(t, r, mode) {
      t.is(r.code, 0, r.stderr);
      t.is(r.stdout, `Policy "resource.${mode}-doc_report.default/${scope()}" created.\n`);
      t.is((await api('GET', `/api/apps/crm/policies/?id=${encodeURIComponent(`resource.${mode}-doc_report.default/${scope()}`)}`)).status, 200);
    },
  });
  await both.exec(t, {
    args: (mode) => args('policy', 'create', '--file', file(`${mode}-portable.json`, { policy_type: 'resource', entity_type: `${mode}-portable`, name: 'x', rules: [] })),
    normalize: volatile,
    check(t, r) {
      t.is(r.code, 0, r.stderr);
      t.regex(r.stdout, /^Policy ".*" created\.\n$/);
    },
  });
  await both.exec(t, {
    args: () => args('policy', 'create', '--file', file('role.json', { policy_type: 'role', name: 'editor', rules: [] })),
    check(t, r) {
      t.is(r.code, 1);
      t.is(r.stderr, 'Error: Invalid input.\n  policy_type: Role policies cannot be created with POST: use PUT.\n');
    },
  });
  const missing = await runCli(args('policy', 'put', '--file', path.join(files, 'nope.json')), cliEnv(s, configDir));
  t.is(missing.code, 1);
  t.regex(missing.stderr, /^Error: Invalid input\.\n {2}file: Cannot read .*nope\.json: No such file\.\n$/);
});

test('policy list, get and inspect: the same output in both modes', async (t) => {
  await both.exec(t, {
    args: () => args('policy', 'list', '--name', '^seed:'),
    check(t, r) {
      t.is(r.code, 0, r.stderr);
      t.regex(r.stdout, new RegExp(`^ID +KIND +NAME +VERSION +DISABLED +MODIFIED\nresource\\.seed_ticket\\.default/${scope()} +resource +seed:ticket +default +no +`));
      t.regex(r.stdout, /\n\n1 policy\n$/);
    },
  });
  await both.exec(t, {
    args: () => args('policy', 'list', '--name', '^owners$', '--json'),
    check(t, r) {
      t.is(r.code, 0, r.stderr);
      t.like(json(r), { status: 'success', total: 1, data: [{ derivedRoles: { name: `${scope()}_owners` } }] });
    },
  });
  for (const id of [`resource.seed_ticket.default/${scope()}`, `resource.seed_ticket.vdefault/${scope()}`]) {
    await both.exec(t, {
      args: () => args('policy', 'get', id), // the id, or its older form (with `v`)
      check(t, r) {
        t.is(r.code, 0, r.stderr);
        t.like(JSON.parse(r.stdout), { resourcePolicy: { resource: 'seed:ticket', scope: scope(), importDerivedRoles: [`${scope()}_owners`] }, metadata: { storeIdentifier: `resource.seed_ticket.default/${scope()}` } });
      },
    });
  }
  await both.exec(t, {
    args: () => args('policy', 'inspect', '--id', `resource.seed_ticket.default/${scope()}`),
    check(t, r) {
      t.is(r.code, 0, r.stderr);
      t.regex(r.stdout, new RegExp(`^POLICY +ACTIONS +DERIVED ROLES +VARIABLES +CONSTANTS +ATTRIBUTES\nresource\\.seed_ticket\\.default/${scope()} +read, update +owner +- +- +-\n\n1 policy\n$`));
    },
  });
});

test('policy check and plan for a named user; delete is a soft delete', async (t) => {
  await both.exec(t, {
    args: () => args('policy', 'check', '--kind', 'seed:ticket', '--resource-id', '7', '--action', 'read', '--action', 'update', '--username', 'boss'),
    check(t, r) {
      t.is(r.code, 0, r.stderr);
      // boss is a site administrator: role `admin`, which these rules do not name.
      t.is(r.stdout, 'KIND         ID  ACTION  EFFECT  DERIVED ROLES\nseed:ticket  7   read    deny    -\nseed:ticket  7   update  deny    -\n');
    },
  });
  await both.exec(t, {
    args: () => args('policy', 'plan', '--kind', 'seed:ticket', '--action', 'read', '--username', 'boss'),
    check(t, r) {
      t.is(r.code, 0, r.stderr);
      t.is(r.stdout, 'kind:   seed:ticket\naction: read\nfilter: ALWAYS_DENIED\n');
    },
  });
  await both.exec(t, {
    args: (mode) => args('policy', 'delete', `resource.${mode}-gone_x.vdefault/${scope()}`), // the older form of its id
    normalize: volatile,
    async check(t, r, mode) {
      t.is(r.code, 0, r.stderr);
      t.is(r.stdout, `Policy "resource.${mode}-gone_x.default/${scope()}" deleted.\n`);
      const listed = await api('GET', `/api/apps/crm/policies/?name_regexp=^${mode}-gone:&include_disabled=true`);
      t.true(listed.body.data[0].disabled);
    },
  });
});
