// Frontend workers under ENVIRONMENT=staging with a retention (issue 31): prefixed addresses
// compared with the sites' prefixed hosts, `_redirects` and `_headers` through HTTP, and
// WORKER_KEEP_BUILDS pruning old builds but never the active one.
import http from 'node:http';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { request, startTestServer, type TestServer } from './helpers.ts';
import { makeOrg } from './site-fixtures.ts';
import { twoSitesWithUsers } from './site-users.ts';
import { multipart, spaSite, zipOf, type SiteFiles } from './worker-fixtures.ts';

let s: TestServer;
let a: TestSite;
const tok: Record<string, string> = {};
const W = '/api/frontend_workers/';

function upload(path: string, fields: Record<string, string>, files: SiteFiles, filename = 'site.zip') {
  const { raw, headers } = multipart(fields, { filename, bytes: zipOf(files) });
  return request(s.url, 'POST', path, { host: a.domain, token: tok.adminA, raw, headers });
}

function visit(host: string, path: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  return new Promise((resolve, reject) => {
    http.get(new URL(path, s.url), { headers: { Host: host }, agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    }).on('error', reject);
  });
}

test.before(async () => {
  s = await startTestServer({ ENVIRONMENT: 'staging', WORKER_KEEP_BUILDS: '2' });
  ({ a } = await twoSitesWithUsers(s, tok));
});
test.after.always(async () => {
  await s?.close();
});

test.serial('staging: the address carries the prefix, and meets the sites\' prefixed hosts in one namespace', async (t) => {
  const root = await s.login();
  const org = await makeOrg(s);
  const site = await s.api('POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: root.access, body: { name: 'Shop' } });
  t.is(site.status, 201, site.text);
  t.is((await s.handle.db.orm.em.fork().execute("SELECT domain FROM public.domains WHERE domain = 'staging-shop.localhost'")).length, 1, 'the site "Shop" holds staging-shop.localhost');
  const clash = await s.api('POST', W, { host: a.domain, token: tok.adminA, body: { name: 'Shop', subdomain_input: 'shop' } });
  t.is(clash.status, 400, clash.text);
  t.regex(clash.body.errors.subdomain_input[0], /staging-shop\.localhost is taken/);
  const availability = await s.api('GET', `${W}check-subdomain-availability/?subdomain=shop`, { host: a.domain, token: tok.adminA });
  t.like(availability.body.data, { available: false, full_domain: 'staging-shop.localhost' });
  t.is(availability.body.data.conflicts_with, undefined, 'a site, not a worker of this site');

  const made = await upload(W, { name: 'Store', subdomain_input: 'store', set_active: 'true' }, spaSite('v1'));
  t.is(made.status, 201, made.text);
  t.like(made.body.data, { subdomain: 'store', full_domain: 'staging-store.localhost' });
  t.regex(made.body.data.build.preview_url, /^http:\/\/staging-[0-9a-f]{8}--store\.localhost/);
  t.regex((await visit('staging-store.localhost', '/')).text, /Shop v1/);
  t.is((await visit('store.localhost', '/')).status, 404, 'the unprefixed host is nobody\'s');
});

test.serial('_redirects and _headers of a build, through HTTP; a _headers setting a cookie refuses the build', async (t) => {
  const files = {
    ...spaSite('v2'),
    _redirects: '/old /assets/logo.svg 301\n/shop/* /index.html 200\n',
    _headers: '/assets/*\n  X-Frame-Options: DENY\n',
  };
  const build = await upload(`${W}store/builds/`, { set_active: 'true' }, files);
  t.is(build.status, 201, build.text);
  const moved = await visit('staging-store.localhost', '/old');
  t.is(moved.status, 301);
  t.is(moved.headers.location, '/assets/logo.svg');
  t.is((await visit('staging-store.localhost', '/assets/logo.svg')).headers['x-frame-options'], 'DENY');
  t.notRegex((await visit('staging-store.localhost', '/_redirects')).text, /\/old/, 'the rules are not served');
  t.regex((await visit('staging-store.localhost', '/shop/cart.html')).text, /Shop v2/, 'a 200 rewrite');

  const cookie = await upload(`${W}store/builds/`, {}, { ...spaSite('v3'), _headers: '/*\n  Set-Cookie: session=stolen\n' });
  t.is(cookie.status, 400, cookie.text);
  t.regex(cookie.body.errors.file.join(' '), /Set-Cookie/i);
});

test.serial('WORKER_KEEP_BUILDS=2: older builds are pruned after an upload, never the active one; a refused build left no row', async (t) => {
  const builds = async () => (await s.api('GET', `${W}store/builds/`, { host: a.domain, token: tok.adminA })).body.data as { uuid: string; title: string; is_active: boolean }[];
  const before = await builds();
  t.is(before.length, 2, 'the first build and the active v2 (the refused one left nothing)');
  const active = before.find((b) => b.is_active)!;
  for (const v of ['v4', 'v5', 'v6']) t.is((await upload(`${W}store/builds/`, { build_title: v }, spaSite(v))).status, 201);
  const left = await builds();
  t.deepEqual(left.map((b) => b.title).sort(), ['site', 'v5', 'v6']);
  t.true(left.some((b) => b.uuid === active.uuid && b.is_active), 'the active build (older than the newest two) stays');
  t.regex((await visit('staging-store.localhost', '/')).text, /Shop v2/);
});
