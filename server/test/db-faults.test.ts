// Faults of the database answer as faults (issue 29 #13, #14), against a PostgreSQL of the test's
// own (server/test/dependencies.ts): frozen (SIGSTOP), requests and /readyz fail within their
// limits instead of hanging, and succeed again once it runs; stopped at once (SIGQUIT, as
// `pg_ctl stop -m immediate`), requests answer 503 SERVICE_UNAVAILABLE with Retry-After, the
// outage is logged once (no stack) and its end with the count, and after a restart requests
// succeed without restarting the server.
import test from 'ava';
import { defineRoute } from '../http/registry.ts';
import { ownPostgres, type OwnPostgres } from './dependencies.ts';
import { capturingLog, startTestServer, type ApiResponse, type TestServer } from './helpers.ts';

const LIMITS = {
  DATABASE_POOL_SIZE: '4',
  DATABASE_STATEMENT_TIMEOUT_MS: '1000',
  DATABASE_QUERY_TIMEOUT_MARGIN_MS: '500',
  DATABASE_ACQUIRE_TIMEOUT_MS: '1000',
  DATABASE_READY_TIMEOUT_MS: '1000',
  BLACKLIST_PRUNE_INTERVAL_MS: '0',
  STORAGE_MAINTENANCE_INTERVAL_MS: '0',
  FUNCTION_QUEUE_ENABLED: 'false',
};
/** How long a freeze lasts at most: every answer must come before it ends. */
const FREEZE_MS = 9_000;

/** A transaction that holds its connection for a while (pg_sleep below the statement timeout). */
const slowTransaction = defineRoute({
  method: 'post',
  path: '/api/test/slow-transaction/',
  operationId: 'test_slow_transaction',
  summary: 'a transaction that sleeps',
  tags: ['test'],
  auth: 'public',
  responses: { 200: null },
  async handler(ctx) {
    await ctx.state.em.transactional(async (tx) => {
      await tx.execute('SELECT pg_sleep(0.9)');
      await tx.execute('SELECT pg_sleep(0.9)');
    });
    ctx.body = { done: true };
  },
});

let pgOwn: OwnPostgres;
let s: TestServer;
let token: string;
const logged = capturingLog();

test.before(async () => {
  pgOwn = await ownPostgres();
  await pgOwn.createDatabase('platform');
  s = await startTestServer({ ...LIMITS, DATABASE_URL: pgOwn.url('platform') }, { log: logged.log, extraRoutes: [slowTransaction] });
  token = (await s.login()).access;
});
test.after.always(async () => {
  await s?.close();
  await pgOwn?.close();
});

const users = () => s.api('GET', '/api/cloud/users/', { token });

/** The log line that ends the database's burst of failures (after `from`), waited for up to 10 s. */
async function burstEnd(from: number): Promise<Record<string, unknown>> {
  for (let i = 0; i < 100; i++) {
    const line = logged.lines.slice(from).find((l) => l.includes('"database available again"'));
    if (line) return JSON.parse(line);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the outage was never logged as over');
}

/** Polls until `path` answers 200 (at most 20 s); the answers before that. */
async function untilOk(send: () => Promise<ApiResponse>): Promise<ApiResponse[]> {
  const failed: ApiResponse[] = [];
  const end = Date.now() + 20_000;
  for (;;) {
    const res = await send();
    if (res.status === 200) return failed;
    failed.push(res);
    if (Date.now() > end) throw new Error(`still ${res.status}: ${res.text}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test.serial('issue 29 #13: a frozen PostgreSQL (SIGSTOP) fails requests and /readyz within seconds, not for the whole freeze; after SIGCONT they succeed', async (t) => {
  t.is((await users()).status, 200);
  const from = logged.lines.length;
  pgOwn.freeze();
  let frozen = true;
  const guard = setTimeout(() => {
    frozen = false;
    pgOwn.thaw();
  }, FREEZE_MS);
  try {
    const started = Date.now();
    const answers = await Promise.all([...Array.from({ length: 6 }, users), s.api('GET', '/readyz')]);
    t.true(frozen, `answered only after the freeze ended (${Date.now() - started} ms)`);
    for (const res of answers.slice(0, -1)) {
      t.is(res.status, 503, res.text);
      t.like(res.body, { status: 'error', code: 'SERVICE_UNAVAILABLE' });
      t.is(res.headers.get('retry-after'), '5');
    }
    t.like(answers.at(-1)!.body, { status: 'error', database: 'unreachable' });
    t.is(answers.at(-1)!.status, 503);
  } finally {
    clearTimeout(guard);
    if (frozen) pgOwn.thaw();
  }
  const late = await untilOk(users);
  t.is((await s.api('GET', '/readyz')).status, 200);
  t.like(await burstEnd(from), { failed: 6 + late.length });
});

test.serial('issue 29 #14: a lost database (immediate stop) answers 503 SERVICE_UNAVAILABLE with Retry-After, logged once without a stack; after a restart requests succeed without a server restart', async (t) => {
  await untilOk(users);
  const from = logged.lines.length;
  await pgOwn.crash();
  let refused = 0;
  for (let i = 0; i < 20; i++) {
    const res = await users();
    t.is(res.status, 503, res.text);
    t.deepEqual(res.body, { status: 'error', code: 'SERVICE_UNAVAILABLE', message: 'The database is unavailable; retry in 5 seconds.', detail: 'Service temporarily unavailable.', retry_after: 5 });
    t.is(res.headers.get('retry-after'), '5');
    refused++;
  }
  t.is((await s.api('GET', '/readyz')).status, 503);
  await pgOwn.restart();
  refused += (await untilOk(users)).length;
  const ended = await burstEnd(from);
  const lines = logged.lines.slice(from);
  const started = lines.filter((l) => l.includes('database unavailable'));
  t.is(started.length, 1, lines.join('\n'));
  t.like(JSON.parse(started[0]!), { level: 40, method: 'GET', path: '/api/cloud/users/' });
  t.like(ended, { level: 30, failed: refused });
  t.false(lines.some((l) => l.includes('unhandled error')), 'no request logged as an unexpected error');
  t.false(lines.some((l) => /\\n\s+at /.test(l)), 'no stack trace in the log');
});

test.serial('issue 29 #14: transactions in flight when the database goes away give their pool connections back: after the restart the whole pool serves again', async (t) => {
  await untilOk(users);
  // Every connection of the pool (4) inside a transaction.
  const inflight = Array.from({ length: 4 }, () => s.api('POST', '/api/test/slow-transaction/'));
  await new Promise((r) => setTimeout(r, 300));
  await pgOwn.crash();
  for (const res of await Promise.all(inflight)) t.is(res.status, 503, res.text);
  await pgOwn.restart();
  await untilOk(users);
  // More requests at once than the pool has connections: each gets one in time (a leaked slot would make them wait, then 503).
  const after = await Promise.all(Array.from({ length: 12 }, users));
  t.deepEqual(after.map((r) => r.status), Array(12).fill(200));
  t.deepEqual((await s.api('POST', '/api/test/slow-transaction/')).body, { done: true });
});

test.serial("issue 29 #14: the function queue's polls of a lost database count in the outage's one line, not a line every 2 s", async (t) => {
  const queueLog = capturingLog();
  const q = await startTestServer({ ...LIMITS, FUNCTION_QUEUE_ENABLED: 'true', DATABASE_URL: pgOwn.url('platform') }, { log: queueLog.log });
  try {
    const from = queueLog.lines.length;
    await pgOwn.crash();
    await new Promise((r) => setTimeout(r, 7_000)); // the queue polls every 2 s: three polls or more
    await pgOwn.restart();
    let ended: string | undefined;
    for (let i = 0; i < 100 && !ended; i++) {
      ended = queueLog.lines.slice(from).find((l) => l.includes('"database available again"'));
      if (!ended) await new Promise((r) => setTimeout(r, 100));
    }
    const lines = queueLog.lines.slice(from);
    const started = lines.filter((l) => l.includes('database unavailable'));
    t.is(started.length, 1, lines.join('\n'));
    t.like(JSON.parse(started[0]!), { level: 40, component: 'function queue: claim failed' });
    t.true(ended !== undefined && (JSON.parse(ended) as { failed: number }).failed >= 3, ended);
    t.false(lines.some((l) => l.includes('"msg":"function queue:')), 'no line of its own per failed poll');
  } finally {
    await q.close();
  }
});
