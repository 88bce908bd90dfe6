// ChangeListener.settled(): a caller's committed changes have reached this process when it
// resolves; concurrent callers share markers, one query at a time on the listening connection.
// Another listening process (behind a proxy that delays the notifications it receives) has them
// too, or is dropped from the wait when silent or gone.
import test from 'ava';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../testing/database.ts';
import { startDelayProxy } from '../testing/delay-proxy.ts';
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

const sleep = (ms: number) => new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms));

test.serial("another listening process: settled() resolves once that process has the changes committed before the call; silent, it costs one timeout and is waited for again once it speaks; gone (bye), it is not waited for", async (t) => {
  const { hostname, port } = new URL(db.url);
  const proxy = await startDelayProxy({ host: hostname, port: Number(port) }, 300);
  const peerSeen = new Set<string>();
  const peer = new ChangeListener().on('tables', (key) => void (key !== null && peerSeen.add(key)));
  t.teardown(async () => {
    proxy.release();
    await peer.close();
    await proxy.close();
  });
  await peer.listen(proxy.url(db.url));
  await listener.settled(5000); // its hello has come
  for (let i = 0; i < 3; i++) {
    await writer.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, `tables:p${i}`]);
    await listener.settled(5000);
    t.true(peerSeen.has(`p${i}`), `change ${i} reached the other process (300 ms late) before settled() resolved`);
  }

  // Silent (its notifications held back): one timeout, then not waited for.
  proxy.hold();
  await writer.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, 'tables:held']);
  await listener.settled(300);
  await sleep(200); // the marker's own timeout, just after the caller's
  t.false(peerSeen.has('held'));
  t.is(await Promise.race([listener.settled(60_000).then(() => 'settled' as const), sleep(5000)]), 'settled', 'a silent process is not waited for again');
  // It speaks again (acknowledges the markers it missed): waited for again.
  proxy.release();
  for (let i = 0; i < 100 && !peerSeen.has('held'); i++) await sleep(50);
  await sleep(1000);
  await writer.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, 'tables:back']);
  await listener.settled(5000);
  t.true(peerSeen.has('back'), 'the process that spoke again is waited for');

  // Gone: its bye is the last thing it sends (else a marker would wait for it until its timeout).
  await peer.close();
  t.is(await Promise.race([listener.settled(60_000).then(() => 'settled' as const), sleep(5000)]), 'settled', 'a process that said bye is not waited for');
});
