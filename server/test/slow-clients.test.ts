// No slow client holds what everyone shares (issue 29 #13), on a pool of 4 connections: CSV
// uploads that dribble in hold no connection while they do (the body is spooled first), so other
// sites' reads and /readyz keep answering; long operations take per-site slots, so a site that
// holds its share waits, then gets 429 with Retry-After, while another site's still run.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { createTables, seedCrm } from './crm.ts';
import { startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

// The spooled bodies of this file's imports go to a directory of its own (this worker's TMPDIR).
const spoolDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slow-clients-'));
process.env.TMPDIR = spoolDir;

const UPLOADS = 6;
const FAST_ROWS = 5_100;
const SLOW_ROWS = 3;
/** Between two rows of the slow part. */
const INTERVAL_MS = 1_000;

let s: TestServer;
let a: TestSite;
let b: TestSite;
let appId = 0;
const tok: Record<string, string> = {};
const schema: TableSchema = { fields: [{ name: 'id', type: 'integer' }, { name: 'label', type: 'string' }], primaryKey: ['id'] };
const D = (table: string) => `/api/apps/crm/datatables/${table}/data/`;
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

test.before(async () => {
  s = await startTestServer({ DATABASE_POOL_SIZE: '4', LONG_OPERATIONS_TOTAL: '3', LONG_OPERATION_WAIT_MS: '2500', LONG_OPERATION_STALL_MS: '6000' });
  ({ a, b } = await twoSitesWithUsers(s, tok));
  [appId] = await seedCrm(s, [a, b]);
  await createTables((method, path, body) => s.api(method, path, { host: a.domain, token: tok.adminA, body }), [['main', 'big', schema]]);
  await createTables((method, path, body) => s.api(method, path, { host: b.domain, token: tok.adminB, body }), [['main', 'notes', schema]]);
  await s.api('POST', D('notes'), { host: b.domain, token: tok.adminB, body: { id: 1, label: 'hello' } });
});
test.after.always(async () => {
  await s?.close();
  fs.rmSync(spoolDir, { recursive: true, force: true });
});

/** POST …/import/ with a chunked body: `fast` rows at once, then one row every INTERVAL_MS. */
function slowImport(first: number): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(`${D('big')}import/`, s.url), {
      method: 'POST',
      agent: false,
      headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'text/csv', 'Transfer-Encoding': 'chunked' },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.write(`id,label\n${Array.from({ length: FAST_ROWS }, (_, i) => `${first + i},row ${first + i}\n`).join('')}`);
    let sent = 0;
    const timer = setInterval(() => {
      const id = first + FAST_ROWS + sent;
      req.write(`${id},slow ${id}\n`);
      if (++sent === SLOW_ROWS) {
        clearInterval(timer);
        req.end();
      }
    }, INTERVAL_MS);
  });
}

/** How long a request took (ms), with its status. */
async function timed(send: () => Promise<{ status: number }>): Promise<{ ms: number; status: number }> {
  const started = Date.now();
  const { status } = await send();
  return { ms: Date.now() - started, status };
}

test.serial('issue 29 #13: more slow CSV uploads than the pool has connections (5,100 rows at once, then a row a second) hold none: another site\'s reads and /readyz answer while they dribble in, and every import completes', async (t) => {
  const uploads = Array.from({ length: UPLOADS }, (_, i) => slowImport(1 + i * 10_000));
  // The fast part has arrived: before, each upload held a connection inside its transaction from here on.
  await new Promise((r) => setTimeout(r, INTERVAL_MS * 0.8));
  const reads: { ms: number; status: number }[] = [];
  for (let i = 0; i < 5; i++) {
    reads.push(await timed(() => s.api('GET', D('notes'), { host: b.domain, token: tok.adminB })));
    reads.push(await timed(() => s.api('GET', '/readyz')));
    await new Promise((r) => setTimeout(r, INTERVAL_MS * 0.4));
  }
  for (const read of reads) {
    t.is(read.status, 200);
    // Answered before the slow uploads' next row could have arrived: nothing waited on them.
    t.true(read.ms < INTERVAL_MS, `a read took ${read.ms} ms while the uploads dribbled in`);
  }
  for (const res of await Promise.all(uploads)) t.like(res, { status: 200, body: { created: FAST_ROWS + SLOW_ROWS, failed: 0 } });
  const [{ n }] = await sql(`SELECT count(*) AS n FROM "${a.schema}"."a${appId}_big"`);
  t.is(Number(n), UPLOADS * (FAST_ROWS + SLOW_ROWS));
  t.deepEqual(fs.readdirSync(spoolDir), [], 'every spooled body deleted');
});

test.serial('an upload the client abandons halfway leaves no spooled file and imports nothing', async (t) => {
  const req = http.request(new URL(`${D('big')}import/`, s.url), {
    method: 'POST',
    agent: false,
    headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'text/csv', 'Transfer-Encoding': 'chunked' },
  });
  req.on('error', () => undefined);
  req.write('id,label\n900001,abandoned\n');
  for (let i = 0; i < 50 && !fs.readdirSync(spoolDir).length; i++) await new Promise((r) => setTimeout(r, 20));
  t.is(fs.readdirSync(spoolDir).length, 1, 'the body is being spooled');
  req.destroy();
  for (let i = 0; i < 50 && fs.readdirSync(spoolDir).length; i++) await new Promise((r) => setTimeout(r, 20));
  t.deepEqual(fs.readdirSync(spoolDir), []);
  t.deepEqual(await sql(`SELECT id FROM "${a.schema}"."a${appId}_big" WHERE id = 900001`), []);
});

/** A CSV export whose reader does not read: it holds its cursor (and its slot) until destroyed. */
function heldExport(site: TestSite, token: string, table: string): Promise<{ status: number; destroy: () => void }> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(`${D(table)}?format=csv`, s.url), { agent: false, headers: { Host: site.domain, Authorization: `Bearer ${token}` } }, (res) => {
      res.pause();
      resolve({ status: res.statusCode ?? 0, destroy: () => req.destroy() });
    });
    req.on('error', () => undefined);
    req.end();
  });
}

test.serial('issue 29 #13: long operations take slots of their site: with two exports held open by readers that do not read, the site\'s third waits, then 429 with Retry-After; another site\'s export still runs; the stalled readers are cut off after LONG_OPERATION_STALL_MS', async (t) => {
  // Enough rows that an unread export fills every buffer and keeps its cursor open.
  await sql(`INSERT INTO "${a.schema}"."a${appId}_big" (id, label) SELECT g, repeat('x', 200) || g FROM generate_series(100001, 400000) g`);
  const held = [await heldExport(a, tok.adminA, 'big'), await heldExport(a, tok.adminA, 'big')];
  try {
    t.deepEqual(held.map((h) => h.status), [200, 200]);
    const third = await s.api('GET', `${D('big')}?format=csv&id__lte=3`, { host: a.domain, token: tok.adminA });
    t.is(third.status, 429, third.text);
    t.like(third.body, { status: 'error', code: 'RATE_LIMIT_EXCEEDED', retry_after: 5 });
    t.regex(third.body.message, /at most 2 at a time/);
    t.is(third.headers.get('retry-after'), '5');
    // Another site has slots of its own.
    const other = await s.api('GET', `${D('notes')}?format=csv`, { host: b.domain, token: tok.adminB });
    t.is(other.status, 200, other.text);
    t.is(other.text, 'id,label\n1,hello\n');
    // A write of the same site is no long operation: it never waits for a slot.
    t.is((await s.api('POST', D('big'), { host: a.domain, token: tok.adminA, body: { id: 999_999, label: 'quick' } })).status, 201);
    // The readers still connected but reading nothing: cut off after 6 s, their slots come back.
    let again = 0;
    for (let i = 0; i < 150 && again !== 200; i++) {
      again = (await s.api('GET', `${D('big')}?format=csv&id__lte=3`, { host: a.domain, token: tok.adminA })).status;
      if (again !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    t.is(again, 200);
  } finally {
    for (const h of held) h.destroy();
  }
});
