// Social apps' `server_url` and the outbound guard, on a server without an allow-list (an
// operator's default): a site superuser cannot make the server connect to an internal host, at
// write time (400 on settings, nothing stored) nor at run time (a stored URL that now names an
// internal host: refused before any connection). The stand-in on 127.0.0.1 counts connections.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { seedSiteUser, siteToken } from './site-users.ts';

const REDIRECT = 'http://localhost:5173/callback';
let s: TestServer;
let site: TestSite;
let admin: string;
let standIn: http.Server;
let port = 0;
let connections = 0;

const on = (method: string, path: string, body?: unknown) => s.api(method, path, { host: site.domain, token: admin, body });
const sql = (text: string, params: unknown[] = []): Promise<any[]> => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const apps = async () => (await sql(`SELECT count(*)::int AS n FROM "${site.schema}".social_apps`))[0].n;
const app = (provider_id: string, server_url: string) => ({ provider: 'openid_connect', provider_id, name: provider_id, client_id: 'c', secret: 's', settings: { server_url } });

test.before(async () => {
  standIn = http.createServer((_req, res) => res.end('{}'));
  standIn.on('connection', () => connections++);
  await new Promise<void>((resolve) => standIn.listen(0, '127.0.0.1', resolve));
  port = (standIn.address() as AddressInfo).port;
  s = await startTestServer({ SOCIAL_LOGIN_ALLOW_HTTP: 'true', OUTBOUND_ALLOW_PORTS: `80,443,${port}` });
  site = await createTestSite(s.handle.db.orm.em.fork());
  await seedSiteUser(s, site, 'boss', { superuser: true });
  admin = await siteToken(s, site, 'boss');
});
test.after.always(async () => {
  await s?.close();
  standIn?.closeAllConnections();
  await new Promise((resolve) => standIn?.close(resolve));
});

test.serial('issue 29 #7: a server_url on an internal host (the port-scanner reproduction) is 400 at write time, nothing stored, nothing connected', async (t) => {
  for (const url of [`http://127.0.0.1:${port}`, `http://localhost:${port}/`, `http://[::ffff:127.0.0.1]:${port}/`, 'http://169.254.169.254/latest/meta-data/', 'http://10.0.0.7/', 'http://127.0.0.1:6379']) {
    const res = await on('POST', '/api/auth/social-apps/', app('inside', url));
    t.is(res.status, 400, url);
    t.regex(res.body.errors.settings[0], /"server_url": .*(not a public destination|Port 6379 is not allowed)/, url);
  }
  t.is(await apps(), 0, 'nothing stored');
  // A name that does not resolve yet is accepted (the run-time check decides when it is used).
  const later = await on('POST', '/api/auth/social-apps/', app('later', 'http://idp.invalid/'));
  t.is(later.status, 201, later.text);
  const patched = await on('PATCH', `/api/auth/social-apps/${later.body.data.id}/`, { settings: { server_url: `http://127.0.0.1:${port}/` } });
  t.is(patched.status, 400);
  t.is((await sql(`SELECT settings->>'server_url' AS u FROM "${site.schema}".social_apps WHERE id = ?`, [later.body.data.id]))[0].u, 'http://idp.invalid/', 'unchanged');
  t.is(connections, 0, 'the stand-in saw no connection');
});

test.serial('issue 29 #7: at run time a stored server_url naming an internal host is refused before any connection', async (t) => {
  const made = await on('POST', '/api/auth/social-apps/', app('moved', 'http://idp2.invalid/'));
  t.is(made.status, 201, made.text);
  // As if its DNS now pointed inside, or the row predates the guard: the request is what is checked.
  await sql(`UPDATE "${site.schema}".social_apps SET settings = jsonb_set(settings, '{server_url}', to_jsonb(?::text)) WHERE id = ?`, [`http://127.0.0.1:${port}/`, made.body.data.id]);
  const res = await on('GET', `/api/auth/moved/redirect/?redirect_uri=${encodeURIComponent(REDIRECT)}`);
  t.is(res.status, 400, res.text);
  t.regex(res.body.message, /not a public destination/);
  t.is(connections, 0, 'the stand-in saw no connection');
  t.is((await sql(`SELECT count(*)::int AS n FROM "${site.schema}".social_login_states`))[0].n, 0, 'no state kept');
});
