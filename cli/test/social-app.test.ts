// `platform social-app …` in both modes (remote with the site's login, direct as the system
// actor): the same output, and the apps really made, changed and deleted (read back through the API).
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { cliEnv, json, MODES, runCli, siteWithLogin, volatile } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let admin: string;

const env = () => cliEnv(s, configDir);
const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });

test.before(async () => {
  s = await startTestServer();
  ({ site, admin, configDir } = await siteWithLogin(s));
  // Social apps are the site superusers' to manage.
  await s.handle.db.orm.em.fork().execute(`UPDATE "${site.schema}".users SET is_superuser = true WHERE username = 'boss'`);
});
test.after.always(async () => {
  await s?.close();
});

test('social-app create, list, get, update, delete: the same output in both modes; the secret never printed after create', async (t) => {
  const out: Record<string, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const direct = mode === 'direct' ? ['--direct'] : [];
    const run = (args: string[]) => runCli([...args, '--site', site.schema, ...direct], env());
    const created = await run([
      'social-app', 'create', '--provider', 'openid_connect', '--provider-id', `sso-${mode}`, '--name', 'Company SSO', '--client-id', 'platform',
      '--secret', 's3cret-value', '--settings', '{"server_url": "https://sso.example.com", "icon": "key"}', '--json',
    ]);
    t.is(created.code, 0, created.stderr);
    const app = json(created).data;
    t.like(app, { provider: 'openid_connect', provider_id: `sso-${mode}`, secret: 's3cret-value', is_configured: true });
    const got = await run(['social-app', 'get', String(app.id)]);
    t.is(got.code, 0, got.stderr);
    t.regex(got.stdout, /^secret: +\*\*\*HIDDEN\*\*\*$/m);
    t.false(got.stdout.includes('s3cret-value'));
    out[mode]!.push(got.stdout.replace(String(app.id), '<id>'));
    const updated = await run(['social-app', 'update', String(app.id), '--name', 'Company login']);
    t.is(updated.code, 0, updated.stderr);
    out[mode]!.push(updated.stdout.replace(String(app.id), '<id>'));
    t.is((await api('GET', `/api/auth/social-apps/${app.id}/`)).body.name, 'Company login');
    const list = await run(['social-app', 'list', '--provider', 'openid_connect', '--search', `sso-${mode}`]);
    t.is(list.code, 0, list.stderr);
    t.regex(list.stdout, /Company login/);
    out[mode]!.push(list.stdout.replace(String(app.id), '<id>'));
    const bad = await run(['social-app', 'create', '--provider', 'myspace', '--name', 'x', '--client-id', 'x', '--secret', 'x']);
    t.not(bad.code, 0);
    t.regex(bad.stderr, /Available providers: openid_connect/);
    out[mode]!.push(bad.stderr);
    const deleted = await run(['social-app', 'delete', String(app.id)]);
    t.is(deleted.code, 0, deleted.stderr);
    t.is((await api('GET', `/api/auth/social-apps/${app.id}/`)).status, 404);
  }
  t.deepEqual(out.direct!.map((x) => volatile(x)), out.remote!.map((x) => volatile(x)));
});
