// ChangeListener.settled(): a caller's committed changes have reached this process when it
// resolves; concurrent callers share markers, one query at a time on the listening connection.
import test from 'ava';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../testing/database.ts';
import { CHANGES_CHANNEL, ChangeListener } from './changes.ts';

let db: TestDatabase;
let listener: ChangeListener;
let writer: pg.Client;
let observer: pg.Client;
const seen = new Set<string>();
const markers: string[] = [];
const warnings: Error[] = [];
const flushes = new Map<string, () => void>();

/** Resolves once the observer has every notification committed before the call (commit order). */
async function observerCaughtUp(): Promise<void> {
  const key = `flush:${Math.random()}`;
  const arrived = new Promise<void>((resolve) => flushes.set(key, resolve));
  await writer.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, key]);
  await arrived;
}

test.before(async () => {
  process.on('warning', (w) => warnings.push(w));
  db = await createTestDatabase('changes');
  listener = new ChangeListener().on('tables', (key) => void (key !== null && seen.add(key)));
  await listener.listen(db.url);
  writer = new pg.Client({ connectionString: db.url });
  observer = new pg.Client({ connectionString: db.url });
  await writer.connect();
  await observer.connect();
  observer.on('notification', (n) => {
    if (n.payload?.startsWith('settled:')) markers.push(n.payload);
    flushes.get(n.payload ?? '')?.();
  });
  await observer.query(`LISTEN ${CHANGES_CHANNEL}`);
});

test.after.always(async () => {
  await listener?.close();
  await writer?.end();
  await observer?.end();
  await db?.drop();
});

test.serial('concurrent callers: each sees the changes committed before its call; markers are shared, sent one at a time', async (t) => {
  const waits: Promise<unknown>[] = [];
  for (let i = 0; i < 20; i++) {
    await writer.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, `tables:s${i}`]);
    waits.push(listener.settled(5000).then(() => t.true(seen.has(`s${i}`), `change ${i} reached the listener before its caller's settled() resolved`)));
  }
  await Promise.all(waits);
  t.is(seen.size, 20);

  // Twenty callers at once: one marker, or two when one was on the wire already. The observer's
  // copies of the first part's markers may still be on their way: counted from after them.
  await observerCaughtUp();
  markers.length = 0;
  await Promise.all(Array.from({ length: 20 }, () => listener.settled(5000)));
  await observerCaughtUp(); // the observer's copy of the last marker
  t.true(markers.length >= 1 && markers.length <= 2, `${markers.length} markers for 20 callers`);

  await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(warnings.map((w) => w.message).filter((m) => m.includes('already executing a query')), []);
});

test.serial('without a connection, settled() resolves at once', async (t) => {
  const idle = new ChangeListener();
  const started = Date.now();
  await idle.settled(5000);
  t.true(Date.now() - started < 1000);
});
