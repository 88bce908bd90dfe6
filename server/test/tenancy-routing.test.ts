// Host routing: platform hosts, site hosts, /sites/{schema}/ paths, unknown hosts, and the
// routing cache with its cross-process invalidation.
import http from 'node:http';
import test from 'ava';
import type { EntityManager } from '@mikro-orm/postgresql';
import { notifyRoutingChanged } from '../../shared/tenancy/host-resolver.ts';
import { createTestSite, type TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from './helpers.ts';

let s: TestServer;
let site: TestSite;
test.before(async () => {
  s = await startTestServer();
  site = await createTestSite(s.handle.db.orm.em.fork());
});
test.after.always(async () => {
  await s?.close();
});

test('an unknown host gets 404 in the standard envelope', async (t) => {
  const res = await s.api('GET', '/api/profile/', { host: 'nobody.example.com' });
  t.is(res.status, 404);
  t.like(res.body, { status: 'error', code: 'NOT_FOUND' });
});

test('platform routes do not exist on a site host, nor through /sites/', async (t) => {
  const token = (await s.login()).access;
  t.is((await s.api('GET', '/api/cloud/users/', { token })).status, 200);
  t.is((await s.api('GET', '/api/cloud/users/', { token, host: site.domain })).status, 404);
  t.is((await s.api('GET', `/sites/${site.schema}/api/cloud/users/`, { token })).status, 404);
  const unknown = await s.api('GET', '/sites/no_such_schema/api/profile/');
  t.is(unknown.status, 404);
  t.is(unknown.body.message, 'Site "no_such_schema" not found.', 'the site named as the caller named it (issue 30 #7)');
  t.is((await s.api('GET', '/sites/Not-A-Schema/x')).body.message, 'Site "Not-A-Schema" not found.');
});

test('the port of the host is ignored, and probes answer on every host', async (t) => {
  t.is((await s.api('GET', '/api/nothing/', { host: `${site.domain}:8123` })).status, 404);
  t.is((await s.api('GET', '/healthz', { host: site.domain })).status, 200);
  t.is((await s.api('GET', '/healthz', { host: 'nobody.example.com' })).status, 200);
});

test('host resolution is cached and invalidated when a domain changes, across processes', async (t) => {
  const { startServer } = await import('../main.ts');
  const other = await startServer({ ...s.config, port: 0 }, { migrate: false, announce: () => undefined });
  try {
    const resolver = other.hosts;
    const before = resolver.misses;
    await resolver.resolveHost(site.domain);
    await resolver.resolveHost(site.domain);
    await resolver.resolveHost(site.domain);
    t.is(resolver.misses - before, 1, 'steady state costs no query');
    t.truthy(await resolver.resolveHost(site.domain));
    // Deactivate the domain in another process's transaction: the cache here must drop it.
    const em = s.handle.db.orm.em.fork();
    await em.transactional(async (tx) => {
      await tx.execute('UPDATE public.domains SET is_active = false WHERE domain = ?', [site.domain]);
      await notifyRoutingChanged(tx as EntityManager);
    });
    let gone = false;
    for (let i = 0; i < 50 && !gone; i++) {
      gone = (await resolver.resolveHost(site.domain)) === null;
      if (!gone) await new Promise((r) => setTimeout(r, 20));
    }
    t.true(gone);
    await em.execute('UPDATE public.domains SET is_active = true WHERE domain = ?', [site.domain]);
    await notifyRoutingChanged(em);
  } finally {
    await other.close();
  }
});

test.serial('issue 30 #9: GET and HEAD of a path without its trailing slash are redirected (308) to the slash form, query kept; other methods get 404 naming it', async (t) => {
  const token = (await s.login()).access;
  const get = await s.api('GET', '/api/cloud/organizations?page_size=5&search=a%20b', { token });
  t.is(get.status, 308);
  t.is(get.headers.get('location'), '/api/cloud/organizations/?page_size=5&search=a%20b');
  const head = await s.api('HEAD', '/api/profile', { token });
  t.is(head.status, 308);
  t.is(head.headers.get('location'), '/api/profile/');
  // Through a site prefix, and on a site host: the Location keeps what the client asked for.
  t.is((await s.api('GET', `/sites/${site.schema}/api/apps`)).headers.get('location'), `/sites/${site.schema}/api/apps/`);
  t.is((await s.api('GET', '/api/apps', { host: site.domain })).headers.get('location'), '/api/apps/');
  const post = await s.api('POST', '/api/cloud/organizations', { token, body: { name: 'Never made' } });
  t.is(post.status, 404);
  t.is(post.body.message, 'No route matches POST /api/cloud/organizations: its path ends with a slash, /api/cloud/organizations/.');
  t.false((await s.api('GET', '/api/cloud/organizations/?search=Never', { token })).text.includes('Never made'));
  // A path that is no route with or without the slash stays a plain 404; an object key (no slash) is its own route.
  t.is((await s.api('GET', '/api/nothing', { token })).status, 404);
  // A path beginning with two slashes is never answered with a Location another host would read as its own.
  const url = new URL(s.url);
  const twoSlashes = await new Promise<{ status?: number; location?: string }>((resolve, reject) =>
    http.get({ host: url.hostname, port: url.port, path: '//evil.example/api/profile', headers: { Authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      resolve({ status: res.statusCode, location: res.headers.location });
    }).on('error', reject),
  );
  t.is(twoSlashes.status, 404);
  t.is(twoSlashes.location, undefined);
});
