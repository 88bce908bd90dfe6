// The route registry: one path may carry a platform def and a tenant def (the host decides
// which runs); a second def for the same scope is a start-up error.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import Koa from 'koa';
import { DomainError } from '../../shared/errors.ts';
import { defineRoute, RouteRegistry, type RouteDef } from './registry.ts';
import type { AppState } from './types.ts';

const route = (operationId: string, scope: RouteDef['scope'], path = '/api/things/'): RouteDef =>
  defineRoute({ method: 'get', path, operationId, summary: operationId, tags: ['t'], auth: 'public', scope, responses: { 200: null }, handler: (ctx) => void (ctx.body = { operationId }) });

async function serve(registry: RouteRegistry) {
  const app = new Koa<AppState>();
  app.use(async (ctx, next) => {
    ctx.state.tenant = ctx.get('X-Tenant') || null;
    try {
      await next();
    } catch (err) {
      ctx.status = err instanceof DomainError ? err.status : 500;
      ctx.body = err instanceof DomainError ? err.toBody() : { message: String(err) };
    }
  });
  app.use(registry.router([]));
  const server = http.createServer(app.callback()).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const get = async (path: string, tenant?: string, method = 'GET') => {
    const res = await fetch(base + path, { method, headers: tenant ? { 'X-Tenant': tenant } : {} });
    const text = await res.text();
    return { status: res.status, body: (text.startsWith('{') ? JSON.parse(text) : { text }) as Record<string, unknown> };
  };
  return { get, close: () => new Promise((r) => server.close(r)) };
}

test('one path, a platform def and a tenant def: the host decides which runs', async (t) => {
  const registry = new RouteRegistry().add(route('platform_things', undefined), route('site_things', 'tenant'), route('both_other', 'both', '/api/other/'));
  const srv = await serve(registry);
  try {
    t.deepEqual((await srv.get('/api/things/')).body, { operationId: 'platform_things' });
    t.deepEqual((await srv.get('/api/things/', 'site_a')).body, { operationId: 'site_things' });
    t.deepEqual((await srv.get('/api/other/', 'site_a')).body, { operationId: 'both_other' });
    t.deepEqual((await srv.get('/api/other/')).body, { operationId: 'both_other' });
  } finally {
    await srv.close();
  }
  const doc = registry.openapi({ title: 't', version: '1' }, {}) as { paths: Record<string, Record<string, { operationId: string }>> };
  t.is(doc.paths['/api/things/'].get.operationId, 'platform_things');
  t.is(doc.paths['/sites/{schema_name}/api/things/'].get.operationId, 'site_things');
});

test('a path served on one side only is 404 on the other', async (t) => {
  const srv = await serve(new RouteRegistry().add(route('site_only', 'tenant')));
  try {
    const res = await srv.get('/api/things/');
    t.is(res.status, 404);
    t.is(res.body.message, 'No route matches GET /api/things/ on this host.');
    t.is((await srv.get('/api/things/', 'site_a')).status, 200);
  } finally {
    await srv.close();
  }
});

test('two defs of one path for the same scope are refused when the router is built', (t) => {
  for (const [x, y] of [[undefined, 'platform'], ['tenant', 'both'], ['both', 'both']] as RouteDef['scope'][][]) {
    const registry = new RouteRegistry().add(route('one', x), route('two', y));
    t.throws(() => registry.router([]), { message: /declared twice for the same scope/ });
  }
});

test('a *rest parameter takes one or more segments; literals registered first win; %2F stays inside the key', async (t) => {
  const keyed = (operationId: string, path: string, method: RouteDef['method'] = 'get'): RouteDef =>
    defineRoute({ method, path, operationId, summary: operationId, tags: ['t'], auth: 'public', responses: { 200: null }, handler: (ctx) => void (ctx.body = { operationId, key: ctx.params.key ?? null }) });
  const registry = new RouteRegistry().add(
    keyed('search', '/o/search/', 'post'),
    keyed('view', '/o/*key/view/'),
    keyed('download', '/o/*key'),
    keyed('download_slash', '/o/*key/'),
    keyed('upload', '/o/*key', 'post'),
  );
  const srv = await serve(registry);
  try {
    t.deepEqual((await srv.get('/o/a')).body, { operationId: 'download', key: 'a' });
    t.deepEqual((await srv.get('/o/a/b/c.txt')).body, { operationId: 'download', key: 'a/b/c.txt' });
    t.deepEqual((await srv.get('/o/a/b/')).body, { operationId: 'download_slash', key: 'a/b' });
    t.deepEqual((await srv.get('/o/a/b/view/')).body, { operationId: 'view', key: 'a/b' });
    t.deepEqual((await srv.get('/o/a/b/view')).body, { operationId: 'download', key: 'a/b/view' });
    t.deepEqual((await srv.get('/o/a%2Fview/')).body, { operationId: 'download_slash', key: 'a/view' });
    t.deepEqual((await srv.get('/o/sp%20ace')).body, { operationId: 'download', key: 'sp ace' });
    t.is((await srv.get('/o/')).status, 404);
    t.deepEqual((await srv.get('/o/search/', undefined, 'POST')).body, { operationId: 'search', key: null });
    t.deepEqual((await srv.get('/o/search', undefined, 'POST')).body, { operationId: 'upload', key: 'search' });
  } finally {
    await srv.close();
  }
});
