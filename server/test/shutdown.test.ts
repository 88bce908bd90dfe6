import http from 'node:http';
import test from 'ava';
import { defineRoute } from '../http/registry.ts';
import { freshQuery } from './dependencies.ts';
import { startTestServer } from './helpers.ts';

/** A route answering after `ms`; `started` resolves when a request is in its handler (in flight: no fixed wait on a loaded machine). */
function slow(ms: number) {
  let begun = () => {};
  const started = new Promise<void>((resolve) => (begun = resolve));
  const route = defineRoute({
    method: 'get',
    path: '/api/test/slow/',
    operationId: 'test_slow',
    summary: 'answers after a delay',
    tags: ['test'],
    auth: 'public',
    responses: { 200: null },
    async handler(ctx) {
      begun();
      await new Promise((r) => setTimeout(r, ms));
      ctx.body = { done: true };
    },
  });
  return { route, started };
}

test('shutdown finishes in-flight requests, refuses new ones, then closes the pool', async (t) => {
  const { route, started } = slow(400);
  const s = await startTestServer({}, { extraRoutes: [route] });
  try {
    const inflight = s.api('GET', '/api/test/slow/');
    await started;
    const closing = s.handle.close();
    await new Promise((r) => setTimeout(r, 50));
    await t.throwsAsync(fetch(`${s.url}/healthz`));
    const res = await inflight;
    t.is(res.status, 200);
    t.deepEqual(res.body, { done: true });
    await closing;
    t.false(await s.handle.db.orm.isConnected());
  } finally {
    await s.db.drop();
  }
});

test('requests still running at the shutdown timeout are cut off', async (t) => {
  const s = await startTestServer({ SHUTDOWN_TIMEOUT_MS: '200' }, { extraRoutes: [slow(5_000).route] });
  try {
    const inflight = s.api('GET', '/api/test/slow/').then(
      () => 'answered',
      () => 'cut off',
    );
    await new Promise((r) => setTimeout(r, 100));
    const started = Date.now();
    await s.handle.close();
    t.true(Date.now() - started < 3_000);
    t.is(await inflight, 'cut off');
  } finally {
    await s.db.drop();
  }
});

/** A GET through a keep-alive agent: the connection stays open, idle, after the answer. */
function keepAliveGet(url: string, agent: http.Agent): Promise<{ status: number; connection: string | undefined }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection }));
      })
      .on('error', reject);
  });
}

test('keep-alive connections do not hold shutdown: idle ones close at once, busy ones when their answer is out', async (t) => {
  const slowRoute = slow(500);
  const s = await startTestServer({ SHUTDOWN_TIMEOUT_MS: '8000' }, { extraRoutes: [slowRoute.route] });
  const idle = new http.Agent({ keepAlive: true });
  const agent = new http.Agent({ keepAlive: true });
  try {
    // One connection idle (its request answered), one busy with a slow request (in its handler:
    // a fixed wait was too short under load, the connection was still being made).
    t.is((await keepAliveGet(`${s.url}/healthz`, idle)).status, 200);
    const busy = keepAliveGet(`${s.url}/api/test/slow/`, agent);
    await slowRoute.started;
    const started = Date.now();
    await s.handle.close();
    t.true(Date.now() - started < 3_000, `shutdown took ${Date.now() - started} ms`);
    const answered = await busy;
    t.is(answered.status, 200);
    t.is(answered.connection, 'close');
  } finally {
    idle.destroy();
    agent.destroy();
    await s.db.drop();
  }
});

/**
 * A slow transactional write: a row inserted, then a wait (in the database: a statement running;
 * in the handler: the transaction idle meanwhile), then a second row, then the commit.
 */
const slowWrite = defineRoute({
  method: 'post',
  path: '/api/test/slow-write/:n/:where/',
  operationId: 'test_slow_write',
  summary: 'writes two rows in one slow transaction',
  tags: ['test'],
  auth: 'public',
  responses: { 200: null },
  async handler(ctx) {
    const n = Number(ctx.params.n);
    await ctx.state.em.transactional(async (tx) => {
      await tx.execute('INSERT INTO shutdown_rows (n) VALUES (?)', [n]);
      if (ctx.params.where === 'database') await tx.execute('SELECT pg_sleep(1.5)');
      else await new Promise((r) => setTimeout(r, 1500));
      await tx.execute('INSERT INTO shutdown_rows (n) VALUES (?)', [n]);
    });
    ctx.body = { written: n };
  },
});

test('issue 29 #14: at SHUTDOWN_TIMEOUT_MS slow transactional writes in flight are cut off and rolled back: none of their rows exist afterwards', async (t) => {
  const s = await startTestServer({ SHUTDOWN_TIMEOUT_MS: '300' }, { extraRoutes: [slowWrite] });
  try {
    await freshQuery(s.db.url, 'CREATE TABLE shutdown_rows (n int NOT NULL)');
    const inflight = Array.from({ length: 20 }, (_, i) =>
      s.api('POST', `/api/test/slow-write/${i}/${i % 2 ? 'database' : 'handler'}/`).then(
        (res) => `answered ${res.status}`,
        () => 'cut off',
      ),
    );
    // Every request has written its first row (uncommitted) before the shutdown begins.
    for (let i = 0; i < 100; i++) {
      const [{ n }] = await freshQuery<{ n: string }>(s.db.url, "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state IN ('active', 'idle in transaction') AND query NOT ILIKE '%pg_stat_activity%'");
      if (Number(n) >= 20) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const started = Date.now();
    await s.handle.close();
    t.true(Date.now() - started < 3_000, `shutdown took ${Date.now() - started} ms`);
    t.deepEqual(await Promise.all(inflight), Array(20).fill('cut off'));
    // Past the moment their waits would have ended and their transactions committed.
    await new Promise((r) => setTimeout(r, 2_000));
    t.deepEqual(await freshQuery(s.db.url, 'SELECT n FROM shutdown_rows'), []);
    const [{ n }] = await freshQuery<{ n: string }>(s.db.url, "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()");
    t.is(Number(n), 0, 'no backend of the server left');
  } finally {
    await s.db.drop();
  }
});
