// `platform site …` and `platform domain …` in both modes: identical output (ids, times and
// the mode tag aside), and the state read back through the API.
import fs from 'node:fs';
import test from 'ava';
import { startDnsStandIn, type DnsStandIn } from '../../shared/testing/dns.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { makeOrg, schemaExists } from '../../server/test/site-fixtures.ts';
import { bothModesMacro, cliEnv, json, storeLogin, tempConfigDir, volatile, type Mode } from './helpers.ts';

let s: TestServer;
let dns: DnsStandIn;
let configDir: string;
let token: string;
const both = bothModesMacro(() => cliEnv(s, configDir));
const MODES: Mode[] = ['remote', 'direct'];
/** `volatile`, and the mode tag inside schema names (`shop_remote`). */
const norm = (text: string) => volatile(text.replace(/_(remote|direct)\b/g, '_<mode>'));

async function apiSite(org: string, body: Record<string, unknown>) {
  const res = await s.api('POST', `/api/cloud/organizations/${org}/sites/`, { token, body });
  if (res.status !== 201) throw new Error(`seed failed: ${res.text}`);
  return res.body.data;
}

test.before(async () => {
  dns = await startDnsStandIn();
  s = await startTestServer({ DNS_SERVERS: dns.server });
  configDir = tempConfigDir();
  await storeLogin(s, configDir);
  token = (await s.login()).access;
  await makeOrg(s, 'acme');
  await makeOrg(s, 'listed');
  await apiSite('listed', { name: 'Listed One', environment: 'staging' });
  await apiSite('listed', { name: 'Listed Two' });
  for (const mode of MODES) {
    await apiSite('acme', { name: `Edit ${mode}` });
    await apiSite('acme', { name: `Drop ${mode}` });
    await apiSite('acme', { name: `Dom ${mode}` });
  }
});
test.after.always(async () => {
  await s?.close();
  await dns?.close();
  if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
});

const getSite = (ref: string) => s.api('GET', `/api/cloud/sites/${ref}/`, { token });

test('site create --json: the API body; progress on stderr; the site, its schema and its domain exist', both, {
  args: (mode) => ['site', 'create', '--org', 'acme', '--name', `Shop ${mode}`, '--environment', 'staging', '--settings', '{"theme":"dark"}', '--json'],
  normalize: norm,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    const body = json(r);
    t.deepEqual(Object.keys(body), ['status', 'message', 'data']);
    t.is(body.message, 'Site created successfully.');
    t.like(body.data, { name: `Shop ${mode}`, slug: `shop-${mode}`, schema_name: `shop_${mode}`, environment: 'staging', organization: 'acme', primary_domain: `shop-${mode}.localhost` });
    t.deepEqual(body.data.site_settings, { theme: 'dark' });
    t.deepEqual((await getSite(`shop-${mode}`)).body, body.data);
    t.true(await schemaExists(s, `shop_${mode}`));
    t.is(
      r.stderr,
      `Creating site "Shop ${mode}" in organization acme: schema, tenant migrations, default data, primary domain…\nSite shop-${mode} ready: schema shop_${mode}, primary domain shop-${mode}.localhost.\n`,
    );
  },
});

test('site create: readable output, and a bad schema name is one error line naming the field', both, {
  args: (mode) => ['site', 'create', '--org', 'acme', '--name', `Bad ${mode}`, '--schema-name', 'Bad-Name'],
  normalize: norm,
  async check(t, r, mode) {
    t.is(r.code, 1);
    t.is(r.stdout, '');
    t.regex(r.stderr, /\nError: Invalid schema name\.\n {2}schema_name: Must start with a letter or underscore/);
    t.is((await getSite(`bad-${mode}`)).status, 404);
  },
});

test('site create in an unknown organization: exit 1, not found', both, {
  args: ['site', 'create', '--org', 'no-such-org', '--name', 'X'],
  check(t, r) {
    t.is(r.code, 1);
    t.true(r.stderr.endsWith('Error: Organization not found.\n'));
  },
});

test('site list --org: a table with a footer (same in both modes)', both, {
  args: ['site', 'list', '--org', 'listed'],
  normalize: norm,
  check(t, r) {
    t.is(r.code, 0);
    const lines = r.stdout.trim().split('\n');
    t.regex(lines[0], /^SLUG\s+NAME\s+SCHEMA\s+ENVIRONMENT\s+ACTIVE\s+ORGANIZATION\s+PRIMARY DOMAIN\s+CREATED$/);
    t.regex(lines[1], /^listed-one\s+Listed One\s+listed_one\s+staging\s+yes\s+listed\s+listed-one\.localhost/);
    t.regex(lines[2], /^listed-two\s+Listed Two\s+listed_two\s+production/);
    t.is(lines.at(-1), '2 sites');
  },
});

test('site list --json with filters: the API page body', both, {
  args: ['site', 'list', '--environment', 'staging', '--search', 'listed', '--json'],
  async check(t, r) {
    t.is(r.code, 0);
    const api = await s.api('GET', '/api/cloud/sites/?environment=staging&search=listed', { token });
    t.deepEqual(json(r).results, api.body.results);
    t.is(json(r).count, 1);
  },
});

test('site update (PATCH) and get: the changed site', both, {
  args: (mode) => ['site', 'update', `edit-${mode}`, '--description', 'changed', '--settings', '{"a":1}', '--no-active', '--json'],
  normalize: norm,
  async check(t, r, mode) {
    t.is(r.code, 0, r.stderr);
    const api = await getSite(`edit-${mode}`);
    t.deepEqual(json(r), api.body);
    t.like(api.body, { description: 'changed', is_active: false, name: `Edit ${mode}` });
    t.deepEqual(api.body.site_settings, { a: 1 });
  },
});

test('site update with malformed --settings: exit 1 naming site_settings', both, {
  args: ['site', 'update', 'listed-one', '--settings', '[1,2]'],
  check(t, r) {
    t.is(r.code, 1);
    t.is(r.stderr, 'Error: Invalid input.\n  site_settings: Must be a JSON object.\n');
  },
});

test('site get and privileges: key-value lines; every permission for the superuser', both, {
  args: ['site', 'privileges', 'listed-one'],
  check(t, r) {
    t.is(r.code, 0);
    t.is(r.stdout, 'view_site\nchange_site\ndelete_site\naccess_site\nmanage_site\nmanage_site_users\nadmin_site\n');
  },
});

test('site get: key-value lines', both, {
  args: ['site', 'get', 'listed-two'],
  check(t, r) {
    t.is(r.code, 0);
    t.regex(r.stdout, /^uuid:\s+[0-9a-f-]{36}\nslug:\s+listed-two\nname:\s+Listed Two\n/);
    t.regex(r.stdout, /\nsite_settings:\s+\{\}\n/);
  },
});

test('site delete: the message; the schema is gone', both, {
  args: (mode) => ['site', 'delete', `drop-${mode}`],
  async check(t, r, mode) {
    t.is(r.code, 0);
    t.is(r.stdout, 'Site deleted successfully.\n');
    t.is((await getSite(`drop-${mode}`)).status, 404);
    t.false(await schemaExists(s, `drop_${mode}`));
  },
});

test('domain add, verify, list, get, update --primary, delete (both modes)', async (t) => {
  const { runCli } = await import('./helpers.ts');
  const env = cliEnv(s, configDir, { DNS_SERVERS: dns.server });
  const outputs: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const run = async (...args: string[]) => {
      const r = await runCli(mode === 'direct' ? [...args, '--direct'] : args, env);
      // The verification token is random: masked like ids and times.
      outputs[mode].push(norm(`${r.code}\n${r.stdout}\n${r.stderr}`).replace(/[0-9a-f]{32}/g, '<token>'));
      return r;
    };
    const site = `dom-${mode}`;
    const host = `www.${mode}.example.com`;
    const added = await run('domain', 'add', host.toUpperCase(), '--site', site, '--json');
    t.is(added.code, 0, added.stderr);
    const record = json(added).data.verification;
    t.like(json(added).data, { domain: host, is_primary: false, is_verified: false, slug: host.replace(/\./g, '-'), verification: { type: 'TXT', name: `_platform-challenge.${host}` } });
    const early = await run('domain', 'update', host, '--site', site, '--primary');
    t.is(early.code, 1);
    t.regex(early.stderr, /unverified domain cannot be primary/);
    const missing = await run('domain', 'verify', host, '--site', site);
    t.is(missing.code, 1);
    t.regex(missing.stderr, /is not verified: no TXT record/);
    dns.setTxt(record.name, [record.value]);
    const verified = await run('domain', 'verify', host, '--site', site, '--json');
    t.is(verified.code, 0, verified.stderr);
    t.true(json(verified).is_verified);
    const primary = await run('domain', 'update', host, '--site', site, '--primary', '--json');
    t.true(json(primary).is_primary, primary.stderr);
    const list = await run('domain', 'list', '--site', site);
    t.regex(list.stdout, new RegExp(`^DOMAIN\\s+SLUG\\s+PRIMARY\\s+ACTIVE\\s+VERIFIED\\s+CREATED\\n${host.replace(/\./g, '\\.')}\\s+\\S+\\s+yes\\s+yes\\s+yes`));
    t.true(list.stdout.trim().endsWith('2 domains'));
    const got = await run('domain', 'get', host, '--site', site, '--json');
    t.deepEqual(json(got), json(primary));
    const back = await run('domain', 'update', `${site}.localhost`, '--site', site, '--primary', '--json');
    t.true(json(back).is_primary);
    const refused = await run('domain', 'delete', `${site}.localhost`, '--site', site);
    t.is(refused.code, 1);
    t.is(refused.stderr, 'Error: Cannot delete the primary domain of a site: make another domain primary first.\n');
    const off = await run('domain', 'update', host, '--site', site, '--no-active', '--host', `new.${mode}.example.com`);
    t.is(off.code, 0);
    t.regex(off.stdout, /is_active:\s+no/);
    t.regex(off.stdout, /is_verified:\s+no/, 'a new host name starts unverified');
    const del = await run('domain', 'delete', `new.${mode}.example.com`, '--site', site);
    t.is(del.stdout, 'Domain deleted successfully.\n');
    const api = await s.api('GET', `/api/cloud/sites/${site}/domains/?is_active=all`, { token });
    t.deepEqual(api.body.results.map((d: { domain: string }) => d.domain), [`${site}.localhost`]);
  }
  t.deepEqual(outputs.direct, outputs.remote, 'outputs differ between remote and direct mode');
});
