// Host routing: platform hosts, site hosts, /sites/{schema}/ paths, unknown hosts, and the
// routing cache with its cross-process invalidation.
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
