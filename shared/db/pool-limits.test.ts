// The pool's limits (issue 29 #13) on real PostgreSQL: a connection not acquired within the
// acquire timeout fails as "database unavailable" (503) instead of waiting; a statement gets a
// client-side limit (its statement timeout plus the margin) that follows a long transaction's
// own statement timeout; a transaction left idle is ended by idle_in_transaction_session_timeout;
// and a connection that fails gives its pool slot back.
import test from 'ava';
import { createTestDatabase, type TestDatabase } from '../testing/database.ts';
import { isDatabaseUnavailable } from './errors.ts';
import { createOrm, type Orm } from './orm.ts';
import { setLocalStatementTimeout } from './statement-timeout.ts';

let db: TestDatabase;
const orms: Orm[] = [];
const orm = async (...args: Parameters<typeof createOrm> extends [string, ...infer R] ? R : never) => {
  const made = await createOrm(db.url, ...args);
  orms.push(made);
  return made;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test.before(async () => {
  db = await createTestDatabase();
});
test.after.always(async () => {
  for (const o of orms) await o.close(true);
  await db?.drop();
});

test('a statement that cannot get a pooled connection within DATABASE_ACQUIRE_TIMEOUT_MS fails as the database unavailable, while the holder still runs', async (t) => {
  const o = await orm({ poolMax: 1, limits: { acquireTimeoutMs: 300 } });
  let held = false;
  let inside!: () => void;
  const holding = new Promise<void>((resolve) => (inside = resolve));
  const holder = o.em.fork().transactional(async (tx) => {
    await tx.execute('SELECT 1'); // the pool's one connection is the holder's from here (a fixed sleep lost the race under load once)
    inside();
    await tx.execute('SELECT pg_sleep(1.5)');
    held = true;
  });
  await holding;
  const err = await t.throwsAsync(o.em.fork().execute('SELECT 1'));
  t.false(held, 'it waited for the holder');
  t.true(isDatabaseUnavailable(err));
  await holder;
  t.deepEqual(await o.em.fork().execute('SELECT 1 AS one'), [{ one: 1 }]);
});

test('every connection carries idle_in_transaction_session_timeout; a transaction left idle longer is ended and its connection replaced', async (t) => {
  const o = await orm({ poolMax: 1, limits: { idleInTransactionTimeoutMs: 300 } });
  t.deepEqual(await o.em.fork().execute('SHOW idle_in_transaction_session_timeout'), [{ idle_in_transaction_session_timeout: '300ms' }]);
  const err = await t.throwsAsync(
    o.em.fork().transactional(async (tx) => {
      await tx.execute('SELECT 1');
      await sleep(800); // the handler waits on something else, holding the transaction
      await tx.execute('SELECT 2');
    }),
  );
  t.truthy(err);
  // The pool's one slot came back: the next statement gets a new connection.
  t.deepEqual(await o.em.fork().execute('SELECT 1 AS one'), [{ one: 1 }]);
});

test('a statement gets a client-side limit (statement timeout + margin) that a long transaction raises with its own timeout; past it the connection is dropped and its slot given back', async (t) => {
  const o = await orm({ poolMax: 1, statementTimeoutMs: 200, limits: { queryTimeoutMarginMs: 200 } });
  // The server's limit lifted by other means than setLocalStatementTimeout: only the client's (400 ms) remains.
  const err = await t.throwsAsync(
    o.em.fork().transactional(async (tx) => {
      await tx.execute(`SET LOCAL statement_timeout = 0`);
      await tx.execute('SELECT pg_sleep(1)');
    }),
  );
  t.is(err?.message, 'Query read timeout');
  t.true(isDatabaseUnavailable(err));
  // A long transaction's own timeout raises the client's limit with it (1 s + 200 ms > 0.6 s).
  const rows = await o.em.fork().transactional(async (tx) => {
    await setLocalStatementTimeout(tx, 1000);
    return tx.execute('SELECT pg_sleep(0.6) AS slept');
  });
  t.deepEqual(rows, [{ slept: '' }]);
  // Back in the pool, the connection has the base limit again (the server's 200 ms ends it first).
  const after = await t.throwsAsync(o.em.fork().execute('SELECT pg_sleep(0.6)'));
  t.is((after as { code?: string }).code, '57014');
});
