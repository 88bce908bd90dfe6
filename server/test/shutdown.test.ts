import http from 'node:http';
import test from 'ava';
import { defineRoute } from '../http/registry.ts';
import { startTestServer } from './helpers.ts';

const slow = (ms: number) =>
  defineRoute({
    method: 'get',
    path: '/api/test/slow/',
    operationId: 'test_slow',
    summary: 'answers after a delay',
    tags: ['test'],
    auth: 'public',
    responses: { 200: null },
    async handler(ctx) {
      await new Promise((r) => setTimeout(r, ms));
      ctx.body = { done: true };
    },
  });

test('shutdown finishes in-flight requests, refuses new ones, then closes the pool', async (t) => {
  const s = await startTestServer({}, { extraRoutes: [slow(400)] });
  try {
    const inflight = s.api('GET', '/api/test/slow/');
    await new Promise((r) => setTimeout(r, 100));
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
  const s = await startTestServer({ SHUTDOWN_TIMEOUT_MS: '200' }, { extraRoutes: [slow(5_000)] });
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
  const s = await startTestServer({ SHUTDOWN_TIMEOUT_MS: '8000' }, { extraRoutes: [slow(500)] });
  const idle = new http.Agent({ keepAlive: true });
  const agent = new http.Agent({ keepAlive: true });
  try {
    // One connection idle (its request answered), one busy with a slow request.
    t.is((await keepAliveGet(`${s.url}/healthz`, idle)).status, 200);
    const busy = keepAliveGet(`${s.url}/api/test/slow/`, agent);
    await new Promise((r) => setTimeout(r, 100));
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
