// DATABASE_STATEMENT_TIMEOUT_MS bounds every statement of a request (set once per pooled
// connection); a route marked `statementTimeout: 'long'` lets its service's transaction run up to
// DATABASE_LONG_STATEMENT_TIMEOUT_MS instead.
import test from 'ava';
import { longTransaction } from '../../shared/db/long-operations.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import { capturingLog, startTestServer, type TestServer } from './helpers.ts';

const SLEEP = 'SELECT pg_sleep(0.6)';
const route = (path: string, extra: Partial<RouteDef>, handler: RouteDef['handler']) =>
  defineRoute({ method: 'get', path, operationId: path, summary: path, tags: ['test'], auth: 'user', responses: { 200: null }, handler, ...extra });

const routes = [
  route('/api/test/sleep/', {}, async (ctx) => {
    await ctx.state.em.execute(SLEEP);
    ctx.body = { slept: true };
  }),
  // What a long operation's service does: its own transaction, the route's longer limit inside it.
  route('/api/test/sleep-long/', { statementTimeout: 'long' }, async (ctx) => {
    await longTransaction(ctx.state.service(), (tx) => tx.execute(SLEEP));
    ctx.body = { slept: true };
  }),
  // The same call on an ordinary route: no longer limit.
  route('/api/test/sleep-tx/', {}, async (ctx) => {
    await longTransaction(ctx.state.service(), (tx) => tx.execute(SLEEP));
    ctx.body = { slept: true };
  }),
  route('/api/test/timeout/', {}, async (ctx) => {
    ctx.body = (await ctx.state.em.execute('SHOW statement_timeout'))[0];
  }),
];

let s: TestServer;
let token: string;
const logged = capturingLog();

test.before(async () => {
  s = await startTestServer({ DATABASE_STATEMENT_TIMEOUT_MS: '300', DATABASE_LONG_STATEMENT_TIMEOUT_MS: '5000' }, { extraRoutes: routes, log: logged.log });
  token = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
});

test('every pooled connection carries the timeout', async (t) => {
  const res = await s.api('GET', '/api/test/timeout/', { token });
  t.deepEqual(res.body, { statement_timeout: '300ms' });
});

test('a statement over the timeout: 504 GATEWAY_TIMEOUT without internals, logged as a warning', async (t) => {
  for (const path of ['/api/test/sleep/', '/api/test/sleep-tx/']) {
    const res = await s.api('GET', path, { token });
    t.is(res.status, 504, path);
    t.like(res.body, { status: 'error', code: 'GATEWAY_TIMEOUT', message: 'The database did not answer in time.' });
    t.false(res.text.includes('pg_sleep'));
    const id = res.headers.get('x-request-id')!;
    const line = logged.lines.find((l) => l.includes(id) && l.includes('statement timeout'));
    t.truthy(line, path);
    t.like(JSON.parse(line!), { level: 40, err: { code: '57014' } });
  }
});

test('a route marked long survives, and its longer limit does not outlive its transaction', async (t) => {
  const res = await s.api('GET', '/api/test/sleep-long/', { token });
  t.is(res.status, 200, res.text);
  t.deepEqual(res.body, { slept: true });
  t.deepEqual((await s.api('GET', '/api/test/timeout/', { token })).body, { statement_timeout: '300ms' });
  t.is((await s.api('GET', '/api/test/sleep/', { token })).status, 504);
});
