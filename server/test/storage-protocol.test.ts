// The write protocol of small objects on the filesystem store (issue 33 item 4; docs/storage.md
// "The blob journal"): what a warm upload and download send to PostgreSQL, and the guarantees the
// protocol keeps — a crash at each step leaves no stray blob and no half-object (the sweep
// finishes or removes what it left), and a reader during overwrites gets the old or the new
// bytes, whole. A crash is simulated by the state it leaves: a staged file without its row, a
// publish or a removal that never happened (the store's method failing, which the protocol
// treats like a crash: the sweep takes over).
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import { sweepBlobs } from '../../shared/storage/blobs.ts';
import { filesystemStore, STAGED_DIR } from '../../shared/storage/objstore/filesystem.ts';
import type { ObjectStore, SiteStore } from '../../shared/storage/objstore/types.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import { seedCrm } from './crm.ts';
import { startTestServer, statementCounter, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';

const B = '/api/apps/crm/storage/buckets/docs/objects/';
let dir = '';
let s: TestServer;
let a: TestSite;
let store: ObjectStore;
let bucketUuid = '';
const tok: Record<string, string> = {};
const put = (key: string, data: string | Buffer) => s.api('PUT', `${B}${key}`, { host: a.domain, token: tok.adminA, raw: data, headers: { 'Content-Type': 'application/octet-stream' } });
const get = (key: string) => s.api('GET', `${B}${key}`, { host: a.domain, token: tok.adminA });
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
const site = (): SiteStore => store.site(a.schema);
const sweep = (graceMs: number) => sweepBlobs(s.handle.db.orm.em.fork(), store, a.schema, graceMs);
/** The site's blobs in place and staged, and the blob keys its rows hold. */
async function state() {
  const placed: string[] = [];
  for await (const k of site().list('')) placed.push(k);
  const staged: string[] = [];
  for await (const e of site().staged!()) staged.push(e.key);
  const held = (await sql(`SELECT blob_key FROM "${a.schema}".storage_objects`)).map((r) => String(r.blob_key));
  const journal = Number((await sql(`SELECT count(*) AS n FROM "${a.schema}".storage_blob_journal`))[0].n);
  return { placed: placed.sort(), staged: staged.sort(), held: held.sort(), journal };
}
/** The prototype of the filesystem site store the server uses (the same module): a step of the protocol made to fail there. */
const proto = () => Object.getPrototypeOf(site()) as Record<'publish' | 'delete', (...args: unknown[]) => Promise<void>>;
async function failing<T>(method: 'publish' | 'delete', run: () => Promise<T>): Promise<T> {
  const p = proto();
  const original = p[method];
  p[method] = async () => {
    throw new Error(`crash before ${method}`);
  };
  try {
    return await run();
  } finally {
    p[method] = original;
  }
}

test.before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'storage-protocol-'));
  s = await startTestServer({ STORAGE_DIR: dir });
  ({ a } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a]);
  const created = await s.api('POST', '/api/apps/crm/storage/buckets/', { host: a.domain, token: tok.adminA, body: { name: 'docs', app_category: 'attachments' } });
  if (created.status !== 201) throw new Error(created.text);
  bucketUuid = String((await sql(`SELECT uuid FROM "${a.schema}".storage_buckets WHERE slug = 'docs'`))[0].uuid);
  store = filesystemStore(dir);
});
test.after.always(async () => {
  await s?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test.serial('a warm new upload sends two statements (the lookup, the row), a download one; neither opens a transaction; a replace is one transaction', async (t) => {
  const counter = statementCounter(s);
  // The fewest of three (the server's counter also sees its background jobs), each answering `status`.
  const fewest = async (run: (i: number) => Promise<{ status: number; text: string }>, status: number) => {
    const { statements, transactions } = await counter.fewest(async (i) => {
      const res = await run(i);
      t.is(res.status, status, res.text);
    });
    return { statements, transactions };
  };
  try {
    await put('warm/up.bin', 'warm-up');
    await get('warm/up.bin');
    t.deepEqual(await fewest((i) => put(`count/new-${i}.bin`, `new ${i}`), 201), { statements: 2, transactions: 0 });
    t.deepEqual(await fewest((i) => get(`count/new-${i}.bin`), 200), { statements: 1, transactions: 0 });
    t.like(await fewest((i) => put(`count/new-${i}.bin`, `replaced ${i}`), 200), { transactions: 1 });
    t.like(await fewest((i) => s.api('DELETE', `${B}count/new-${i}.bin`, { host: a.domain, token: tok.adminA }), 200), { transactions: 0 });
  } finally {
    counter.restore();
  }
  const after = await state();
  t.deepEqual(after.placed, after.held, 'every blob in place is held by a row, and every row has its blob');
  t.deepEqual(after.staged, []);
  t.is(after.journal, 0);
});

test.serial('an upload staged, its row never written (a crash mid-write or before the row): kept while it may be live, then removed by the sweep; no stray', async (t) => {
  const before = await state();
  // Whole bytes staged, no row (the process died before the row's statement).
  await site().stage!(`${bucketUuid}/crashed-before-row`, Readable.from([Buffer.from('whole')]), { contentType: 'text/plain' });
  // Half the bytes of a file (the process died while writing it).
  const half = path.join(dir, STAGED_DIR, a.schema, bucketUuid, 'crashed-mid-write');
  await mkdir(path.dirname(half), { recursive: true });
  await writeFile(half, 'hal');
  t.is(await sweep(3600_000), 0, 'younger than the grace period: an upload may still be writing it');
  t.is((await state()).staged.length, 2);
  await new Promise((r) => setTimeout(r, 20));
  t.is(await sweep(10), 2);
  t.deepEqual(await state(), before, 'nothing left: no stray blob, no row');
});

test.serial('a crash after the row\'s commit, before the blob is moved into place: the object reads whole from where it is staged, and the sweep moves it into place', async (t) => {
  const res = await failing('publish', () => put('crash/after-commit.bin', 'committed bytes'));
  t.is(res.status, 201, res.text);
  const key = String((await sql(`SELECT blob_key FROM "${a.schema}".storage_objects WHERE path = 'crash/after-commit.bin'`))[0].blob_key);
  let now = await state();
  t.true(now.staged.includes(key), 'still staged');
  t.false(now.placed.includes(key));
  t.is((await get('crash/after-commit.bin')).text, 'committed bytes', 'a reader finds the staged bytes');
  t.is(await sweep(3600_000), 1, 'a staged blob a row holds is published at once, whatever its age');
  now = await state();
  t.deepEqual(now.staged, []);
  t.true(now.placed.includes(key));
  t.deepEqual(now.placed, now.held);
  t.is((await get('crash/after-commit.bin')).text, 'committed bytes');
});

test.serial('a crash after a replace or a delete committed, before the old blob is removed: journaled, removed by the sweep; no stray', async (t) => {
  t.is((await put('crash/old.bin', 'version 1')).status, 201);
  t.is((await put('crash/gone.bin', 'to delete')).status, 201);
  const replaced = await failing('delete', () => put('crash/old.bin', 'version 2'));
  t.is(replaced.status, 200, replaced.text);
  const deleted = await failing('delete', () => s.api('DELETE', `${B}crash/gone.bin`, { host: a.domain, token: tok.adminA }));
  t.is(deleted.status, 200, deleted.text);
  let now = await state();
  t.is(now.journal, 2, 'both old blobs journaled as orphans');
  t.is(now.placed.length, now.held.length + 2, 'two blobs no row holds, for now');
  t.is((await get('crash/old.bin')).text, 'version 2');
  t.is(await sweep(3600_000), 2, 'orphans go at once');
  now = await state();
  t.deepEqual(now.placed, now.held);
  t.deepEqual(now.staged, []);
  t.is(now.journal, 0);
});

test.serial('a reader during overwrites gets the old or the new bytes, whole — also while the new blob is still staged', async (t) => {
  const versions = Array.from({ length: 8 }, (_, i) => Buffer.alloc(64 * 1024, 65 + i));
  t.is((await put('race/obj.bin', versions[0]!)).status, 201);
  const p = proto();
  const publish = p.publish;
  // Each publish a little late: readers meet rows whose blob is still staged.
  p.publish = async function (this: unknown, ...args: unknown[]) {
    await new Promise((r) => setTimeout(r, 15));
    return publish.apply(this, args);
  };
  let reads = 0;
  let writing = true;
  try {
    const reader = async () => {
      while (writing) {
        const r = await get('race/obj.bin');
        t.is(r.status, 200, r.text);
        t.true(versions.some((v) => v.equals(r.bytes)), `a download of ${r.bytes.length} bytes that is no version whole`);
        reads++;
      }
    };
    const readers = Array.from({ length: 4 }, reader);
    for (const v of versions.slice(1)) t.is((await put('race/obj.bin', v)).status, 200);
    writing = false;
    await Promise.all(readers);
  } finally {
    p.publish = publish;
  }
  t.true(reads >= 8, `${reads} reads`);
  t.true(versions.at(-1)!.equals((await get('race/obj.bin')).bytes));
  const now = await state();
  t.deepEqual(now.placed, now.held, 'each replaced blob removed, the last one in place');
  t.is(now.journal, 0);
});

test.serial('a refused or failed upload leaves nothing: a type not allowed, a declared or streamed size over the limit, a store failing before it reads the body', async (t) => {
  const strict = '/api/apps/crm/storage/buckets/strict/objects/';
  const made = await s.api('POST', '/api/apps/crm/storage/buckets/', { host: a.domain, token: tok.adminA, body: { name: 'strict', app_category: 'attachments', allowed_mime_types: ['image/png'], file_size_limit: 2000 } });
  t.is(made.status, 201, made.text);
  const before = await state();
  const png = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(400, 1)]);
  const upload = (key: string, data: Buffer) => s.api('PUT', `${strict}${key}`, { host: a.domain, token: tok.adminA, raw: data, headers: { 'Content-Type': 'application/octet-stream' } });
  const text = await upload('refused/text.txt', Buffer.from('plain text, not a picture'));
  t.is(text.status, 400, text.text);
  t.regex(text.body.message, /not allowed/);
  const declared = await upload('refused/large.png', Buffer.concat([png, Buffer.alloc(3000)]));
  t.is(declared.status, 400, declared.text);
  t.regex(declared.body.message, /exceeds the limit of 2000 bytes/);
  // No Content-Length: the size is found over the limit while the bytes stream into the staged file.
  const streamed = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request(new URL(`${strict}refused/streamed.png`, s.url), { method: 'PUT', headers: { Host: a.domain, Authorization: `Bearer ${tok.adminA}`, 'Content-Type': 'image/png', 'Transfer-Encoding': 'chunked' } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: body }));
    });
    req.on('error', reject);
    req.write(png);
    setTimeout(() => req.end(Buffer.alloc(3000)), 50);
  });
  t.is(streamed.status, 400, streamed.text);
  t.regex(streamed.text, /exceeds the limit of 2000 bytes/);
  // The store fails before it reads a byte of the body (a full disk when the file is made).
  const p = Object.getPrototypeOf(site()) as { stage: (...args: unknown[]) => Promise<unknown> };
  const stage = p.stage;
  p.stage = async () => {
    throw new Error('no space left on the device');
  };
  try {
    t.is((await upload('failed/store.png', png)).status, 500);
  } finally {
    p.stage = stage;
  }
  t.deepEqual(await state(), before, 'no staged file, no blob, no row, no journal entry');
  t.is((await upload('accepted/ok.png', png)).status, 201, 'the next upload is stored');
});
